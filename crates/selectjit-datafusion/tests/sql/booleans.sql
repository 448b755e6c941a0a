-- replaced: 1
SELECT id, CASE WHEN qty < 25 THEN flag WHEN qty < 75 THEN NOT flag ELSE NULL END AS r FROM t ORDER BY id
