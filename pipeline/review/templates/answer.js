const form = document.getElementById('answer');
form.addEventListener('submit', (e) => {
  if (form.dataset.sent) { e.preventDefault(); return; }
  form.dataset.sent = '1';
});
document.addEventListener('keydown', (e) => {
  if (e.ctrlKey || e.metaKey || e.altKey || ['TEXTAREA', 'INPUT'].includes(e.target.tagName)) return;
  const choice = {'1': '1', '2': '2', 't': 'tie', 'T': 'tie'}[e.key];
  if (!choice) return;
  e.preventDefault();
  document.getElementById('choose-' + choice).click();
});
