-- replaced: 0
-- (DataFusion's simplifier rewrites a CASE of boolean values into AND / OR before planning)
SELECT id, CASE WHEN qty < 25 THEN flag WHEN qty < 75 THEN NOT flag ELSE NULL END AS r FROM t ORDER BY id
