-- replaced: 1
-- float sums
SELECT 100.00 * SUM(CASE WHEN ptype LIKE 'PROMO%' THEN price * (1 - discount) ELSE 0 END) / SUM(price * (1 - discount)) AS promo_revenue FROM t
