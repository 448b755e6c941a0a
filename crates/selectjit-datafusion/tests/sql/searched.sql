-- replaced: 1
SELECT id, CASE WHEN qty < 10 THEN a WHEN qty < 50 THEN b ELSE c END AS r FROM t ORDER BY id
