-- replaced: 2
SELECT id,
       CASE WHEN priority IN ('1-URGENT', '2-HIGH') THEN 1
            WHEN priority NOT IN ('5-LOW', '3-MEDIUM') THEN 2
            WHEN s = 'x' OR s = 'yy' OR s = '' THEN 3
            WHEN NOT (shipmode <> 'MAIL' AND shipmode <> 'SHIP') THEN 4
            WHEN 'PROMO BRUSHED' = ptype THEN 5
            WHEN ptype <> 'ECONOMY' THEN 6
            ELSE 7 END AS r,
       CASE shipmode WHEN 'AIR' THEN a WHEN 'TRUCK' THEN b END AS m
FROM t ORDER BY id
