/**
 * bgone_reserve_group: one group of reservations (credits.ts) in one statement, so that the
 * accounts' locks are held for the statement and its commit only, never across a round trip to
 * the node. A function (VOLATILE, READ COMMITTED) runs each of its statements with a snapshot of
 * its own: the counts read after the locks are taken see everything their previous holders
 * committed, and each reservation inserted is seen by the items after it.
 *
 * The rules are those of the store (../rules.ts, ../store.ts's CreditStore.reserve), item by item
 * in the order given: an unknown account; a disabled one; an Idempotency-Key whose reservation is
 * in flight (the same image: in progress; another: a conflict) or whose charge is recorded after
 * `p_key_after` (the same image: already charged, nothing reserved; another: a conflict); no
 * credit left (remaining = the effective plan's credits + granted - used - reserved); else a
 * reservation. The effective plan is the subscribed one until `cancel_at`, then free
 * (effectivePlanAt); the plans' credits come in `p_plans`/`p_plan_credits`, the cycle of each
 * item's account in `p_cycles` (the node computes it from the account's sign-up time).
 *
 * Each item gives one row: its place (from 1), its outcome, its reservation's id, and the credits
 * left after its charge (for 'reserved' and 'already_charged').
 */
export const RESERVE_GROUP_FUNCTION = `
  CREATE FUNCTION bgone_reserve_group(
    p_accounts bigint[], p_cycles int[], p_key_ids bigint[], p_request_ids text[], p_idem_keys text[], p_hashes text[],
    p_owner text, p_now bigint, p_key_after bigint, p_plans text[], p_plan_credits bigint[])
  RETURNS TABLE (ord int, outcome text, reservation_id bigint, remaining bigint)
  LANGUAGE plpgsql VOLATILE AS $fn$
  #variable_conflict use_column
  DECLARE
    v_ids bigint[];
    v_disabled boolean[];
    v_left bigint[];
    v_at int;
    v_hash text;
  BEGIN
    -- Locked in id order: groups of every node take them in the same order, so they never deadlock.
    PERFORM 1 FROM accounts a WHERE a.id = ANY (p_accounts) ORDER BY a.id FOR NO KEY UPDATE;
    SELECT array_agg(s.id), array_agg(s.disabled), array_agg(s.credits_left) INTO v_ids, v_disabled, v_left
    FROM (
      SELECT a.id, a.disabled_at IS NOT NULL AS disabled,
        greatest(0, coalesce(p.credits, 0) + coalesce(u.granted, 0) - coalesce(u.used, 0)
          - (SELECT count(*) FROM reservations r WHERE r.account_id = a.id AND r.cycle_index = c.cycle_index)) AS credits_left
      FROM (SELECT DISTINCT t.id, t.cycle_index FROM unnest(p_accounts, p_cycles) AS t(id, cycle_index)) c
      JOIN accounts a ON a.id = c.id
      LEFT JOIN cycle_usage u ON u.account_id = a.id AND u.cycle_index = c.cycle_index
      LEFT JOIN unnest(p_plans, p_plan_credits) AS p(name, credits)
        ON p.name = CASE WHEN a.cancel_at IS NOT NULL AND p_now >= a.cancel_at THEN 'free' ELSE a.plan END
    ) s;
    FOR i IN 1 .. coalesce(cardinality(p_accounts), 0) LOOP
      ord := i;
      outcome := NULL;
      reservation_id := NULL;
      remaining := NULL;
      v_at := array_position(v_ids, p_accounts[i]);
      IF v_at IS NULL THEN
        outcome := 'not_found';
      ELSIF v_disabled[v_at] THEN
        outcome := 'account_disabled';
      ELSE
        remaining := v_left[v_at];
        IF p_idem_keys[i] IS NOT NULL THEN
          SELECT r.image_hash INTO v_hash FROM reservations r WHERE r.account_id = p_accounts[i] AND r.idempotency_key = p_idem_keys[i];
          IF FOUND THEN
            outcome := CASE WHEN v_hash = p_hashes[i] THEN 'idempotency_in_progress' ELSE 'idempotency_conflict' END;
          ELSE
            SELECT k.image_hash INTO v_hash FROM idempotency_keys k
            WHERE k.account_id = p_accounts[i] AND k.idempotency_key = p_idem_keys[i] AND k.created_at > p_key_after;
            IF FOUND THEN
              outcome := CASE WHEN v_hash = p_hashes[i] THEN 'already_charged' ELSE 'idempotency_conflict' END;
            END IF;
          END IF;
        END IF;
        IF outcome IS NULL AND v_left[v_at] <= 0 THEN
          outcome := 'payment_required';
        ELSIF outcome IS NULL THEN
          INSERT INTO reservations (account_id, api_key_id, owner, request_id, idempotency_key, image_hash, cycle_index, created_at)
          VALUES (p_accounts[i], p_key_ids[i], p_owner, p_request_ids[i], p_idem_keys[i], p_hashes[i], p_cycles[i], p_now)
          RETURNING id INTO reservation_id;
          v_left[v_at] := v_left[v_at] - 1;
          remaining := v_left[v_at];
          outcome := 'reserved';
        END IF;
      END IF;
      RETURN NEXT;
    END LOOP;
  END
  $fn$;
`;
