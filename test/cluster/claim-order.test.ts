import { describe, expect, it } from 'vitest';
import { ClaimOrder } from '../../src/cluster/claim-order.ts';

describe('the claim order of a replica', () => {
  it('gives the session that waited longest first, keeping the earliest time known of each', () => {
    const order = new ClaimOrder();
    order.add('b', 20);
    order.add('a', 30);
    order.add('a', 10);
    order.add('b', 40);
    expect(order.hasOlderThan(15)).toBe(true);
    expect([order.takeOldest(), order.takeOldest(), order.takeOldest()]).toEqual(['a', 'b', undefined]);
  });

  it('forgets on a done notice only sessions it knows from other replicas\' notifications alone', () => {
    const order = new ClaimOrder();
    order.add('heard', 1, true);
    order.add('own', 2);
    order.add('both', 3, true);
    order.add('both', 4);
    order.add('own', 5, true);
    for (const key of ['heard', 'own', 'both']) order.dropForeign(key);
    expect([order.takeOldest(), order.takeOldest(), order.takeOldest()]).toEqual(['own', 'both', undefined]);
  });
});
