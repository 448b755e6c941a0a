-- replaced: 2
SELECT shipmode,
       SUM(CASE WHEN priority = '1-URGENT' OR priority = '2-HIGH' THEN 1 ELSE 0 END) AS high_line_count,
       SUM(CASE WHEN priority <> '1-URGENT' AND priority <> '2-HIGH' THEN 1 ELSE 0 END) AS low_line_count
FROM t GROUP BY shipmode ORDER BY shipmode
