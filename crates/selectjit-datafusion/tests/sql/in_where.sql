-- replaced: 1
SELECT id, a FROM t WHERE CASE WHEN qty < 30 THEN a WHEN qty < 60 THEN b ELSE c END > 0 ORDER BY id
