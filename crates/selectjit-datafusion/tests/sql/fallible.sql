-- replaced: 0
-- reason: may fail
SELECT id, CASE WHEN a <> 0 THEN b / a ELSE 0 END AS r FROM t ORDER BY id
