-- replaced: 1
SELECT id, CASE WHEN flag THEN price WHEN qty IS NULL THEN -1.5 END AS r FROM t ORDER BY id
