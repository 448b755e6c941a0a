-- replaced: 0
-- reason: not of fixed width
SELECT id, CASE WHEN qty < 25 THEN s WHEN qty < 75 THEN 'mid' ELSE NULL END AS r FROM t ORDER BY id
