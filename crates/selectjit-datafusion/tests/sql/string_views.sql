-- replaced: 1
SELECT id,
       CASE WHEN arrow_cast(priority, 'Utf8View') IN ('1-URGENT', '4-NOT SPECIFIED') THEN 1
            WHEN arrow_cast(ptype, 'LargeUtf8') = 'STANDARD PLATED'
                 OR arrow_cast(ptype, 'LargeUtf8') = 'PROMO ANODIZED' THEN 2
            WHEN arrow_cast(s, 'Utf8View') <> 'zzz' AND arrow_cast(s, 'Utf8View') <> '' THEN 3
            ELSE 4 END AS r
FROM t ORDER BY id
