-- Running totals per customer over every purchased item (one row per customer, merged by
-- key). Amounts are rounded to cents so a total does not depend on the order of the sums.
CREATE OR REPLACE TEMP VIEW customer_spend AS
SELECT
  customer_id,
  count(*) AS purchased_items,
  sum(quantity) AS units,
  round(sum(amount), 2) AS total_spent,
  min(event_time) AS first_purchase,
  max(event_time) AS last_purchase
FROM purchase_rows
GROUP BY customer_id
