-- The events that change a cart: lines added and products bought.
CREATE OR REPLACE TEMP VIEW cart_changes AS
SELECT customer_id, event_time, event_type, product_id, price
FROM events
WHERE event_type IN ('add_to_cart', 'purchase')
