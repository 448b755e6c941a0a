-- replaced: 1
SELECT id, a FROM t WHERE CASE WHEN qty < 30 THEN a > 0 WHEN qty < 60 THEN b > 0 ELSE flag END ORDER BY id
