import KeyvPostgres from '@keyv/postgres';
import Keyv from 'keyv';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.ts';
import { NotFoundError } from '../../src/core/errors.ts';
import type { PairingRequest, PairingStore } from '../../src/routing/pairing.ts';
import { openPairingStore } from '../../src/stores.ts';
import { describePg, useTestDatabase } from '../helpers/postgres.ts';

const db = useTestDatabase();
const HOUR = 3_600_000;
const T0 = Date.UTC(2026, 0, 1);

describePg('pairing on PostgreSQL (two replicas)', () => {
  const clock = new ManualClock(T0);
  let a: PairingStore;
  let b: PairingStore;
  beforeAll(() => {
    a = openPairingStore(db.uri, { clock, pool: db.pool });
    b = openPairingStore(db.uri, { clock });
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
  });

  it('at most 3 pending per channel across replicas, also when 12 senders ask at once', async () => {
    const outcomes = await Promise.all(Array.from({ length: 12 }, (_, i) => (i % 2 ? a : b).request('telegram', 'default', `peer${i}`, `P${i}`)));
    expect(outcomes.filter((o) => o.status === 'created')).toHaveLength(3);
    expect(outcomes.filter((o) => o.status === 'full')).toHaveLength(9);
    expect(await a.pending('telegram')).toHaveLength(3);
    // Another channel has its own three.
    expect((await b.request('discord', 'default', 'd1')).status).toBe('created');
    // A sender with a pending code gets the same code again, from either replica.
    const mine = (await a.pending('telegram'))[0]!;
    const again = await b.request('telegram', 'default', mine.peerId);
    expect(again).toEqual({ status: 'existing', request: mine });
  });

  it('approve on one replica, paired on the other; expired codes are dropped and make room', async () => {
    const [first, second] = await b.pending('telegram') as [PairingRequest, PairingRequest, PairingRequest];
    const peer = await a.approve('telegram', first.code.toLowerCase());
    expect(peer).toEqual({ channel: 'telegram', peerId: first.peerId, name: first.name, approvedAt: T0 });
    expect(await b.isPaired('telegram', first.peerId)).toBe(true);
    expect(await b.paired()).toEqual([peer]);
    await expect(b.approve('telegram', first.code)).rejects.toBeInstanceOf(NotFoundError);
    expect((await a.request('telegram', 'default', 'newcomer')).status).toBe('created');
    clock.advance(HOUR);
    await expect(a.approve('telegram', second.code)).rejects.toBeInstanceOf(NotFoundError);
    const fresh = await Promise.all(['x', 'y', 'z', 'w'].map((p) => b.request('telegram', 'default', p)));
    // Which of the four is refused depends on the order they take the channel's lock in.
    expect(fresh.map((o) => o.status).sort()).toEqual(['created', 'created', 'created', 'full']);
    expect(await b.revoke('telegram', first.peerId)).toBe(true);
    expect(await a.isPaired('telegram', first.peerId)).toBe(false);
  });

  it('lives in the keyv table under the pairing namespace, in keyv\'s own form (@keyv/postgres reads it)', async () => {
    const outcome = await a.request('discord', 'default', 'd2');
    if (outcome.status !== 'created') throw new Error(outcome.status);
    const code = outcome.request;
    const keyv = new Keyv({ store: new KeyvPostgres({ uri: db.uri, keySize: 1024 }), namespace: 'pairing' });
    try {
      expect(await keyv.get(`code:discord:${code.code}`)).toEqual(code);
    } finally {
      await keyv.disconnect();
    }
  });
});
