-- replaced: 1
SELECT id, CASE WHEN price > 50.0 THEN price * 2.0 WHEN price = 0.0 THEN -0.0 WHEN price IS NULL THEN 0.0 ELSE price - 1.0 END AS r FROM t ORDER BY id
