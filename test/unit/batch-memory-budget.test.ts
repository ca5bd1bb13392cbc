/**
 * The batch memory budget (src/batches/batch-memory-budget.ts): the whole budget, and each account's
 * share of it, in uploads, queued images and kept results.
 */
import { describe, expect, it } from 'vitest';
import { BatchMemoryBudget } from '../../src/batches/batch-memory-budget.js';

describe('BatchMemoryBudget', () => {
  it("refuses what passes the whole budget ('server') or the account's share ('account'), taking nothing; other accounts keep their share", () => {
    const budget = new BatchMemoryBudget(1000, 400);
    expect(budget.tryTake(1, 300)).toBeUndefined();
    expect(budget.tryTake(1, 101)).toBe('account');
    expect(budget.tryTake(1, 100)).toBeUndefined();
    expect(budget.heldBy(1)).toBe(400);
    expect(budget.tryTake(2, 400)).toBeUndefined();
    expect(budget.tryTake(3, 201)).toBe('server'); // 800 held: the whole budget is checked first
    expect(budget.tryTake(3, 200)).toBeUndefined();
    expect({ used: budget.used, one: budget.heldBy(1), three: budget.heldBy(3) }).toEqual({ used: 1000, one: 400, three: 200 });
    budget.give(1, 400);
    expect({ used: budget.used, one: budget.heldBy(1) }).toEqual({ used: 600, one: 0 });
    expect(budget.tryTake(1, 400)).toBeUndefined();
  });

  it('take() accounts a result that exists already, even past the share; give() never goes below zero', () => {
    const budget = new BatchMemoryBudget(1000, 100);
    budget.take(1, 150);
    expect(budget.heldBy(1)).toBe(150);
    expect(budget.tryTake(1, 1)).toBe('account');
    budget.give(1, 500);
    expect({ used: budget.used, held: budget.heldBy(1) }).toEqual({ used: 0, held: 0 });
    expect(budget.tryTake(1, -1)).toBe('server');
    expect(new BatchMemoryBudget(1000).accountLimit).toBe(1000);
  });
});
