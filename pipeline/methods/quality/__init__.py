"""How far to trust a judge: calibration against people's preferences (:mod:`.calibration`), ratings with the length
and style regressed out (:mod:`.style`) and AlpacaEval's length-controlled win rate (:mod:`.alpaca_lc`)."""
