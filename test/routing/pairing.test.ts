import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { ResolvedConfig } from '../../src/config/resolved.ts';
import { ManualClock } from '../../src/core/clock.ts';
import { NotFoundError } from '../../src/core/errors.ts';
import { PairingStore, type PairingRequest } from '../../src/routing/pairing.ts';
import { pairingAdmin, requirePairingChannel } from '../../src/routing/pairing-admin.ts';

const HOUR = 3_600_000;
const T0 = Date.UTC(2026, 0, 1);

const dirs: string[] = [];
const stores: PairingStore[] = [];
afterEach(async () => {
  for (const s of stores.splice(0)) await s.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function memoryStore(clock = new ManualClock(T0)) {
  const store = new PairingStore({ uri: 'memory', clock });
  stores.push(store);
  return { store, clock };
}

function sqliteUri(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'sb-pairing-'));
  dirs.push(dir);
  return `sqlite://${path.join(dir, 'state', 'sessions.sqlite')}`;
}

async function created(store: PairingStore, channel: string, peerId: string, name?: string): Promise<PairingRequest> {
  const outcome = await store.request(channel, 'default', peerId, name);
  if (outcome.status !== 'created') throw new Error(`expected a new code, got ${outcome.status}`);
  return outcome.request;
}

describe('PairingStore: codes', () => {
  it('a code is 8 characters without look-alikes (0 O 1 I), valid exactly one hour', async () => {
    const { store } = memoryStore();
    for (let i = 0; i < 3; i++) {
      const r = await created(store, 'telegram', `p${i}`);
      expect(r.code).toMatch(/^[A-HJ-NP-Z2-9]{8}$/);
      expect(r).toMatchObject({ channel: 'telegram', accountId: 'default', peerId: `p${i}`, createdAt: T0, expiresAt: T0 + HOUR });
    }
  });

  it('the same sender asking again gets the same code', async () => {
    const { store, clock } = memoryStore();
    const first = await created(store, 'telegram', '42', 'Alice');
    clock.advance(HOUR / 2);
    const again = await store.request('telegram', 'default', '42');
    expect(again).toEqual({ status: 'existing', request: first });
  });

  it('at most 3 codes wait per channel; the 4th sender is refused, other channels are not affected', async () => {
    const { store } = memoryStore();
    for (const id of ['1', '2', '3']) await created(store, 'telegram', id);
    expect(await store.request('telegram', 'default', '4')).toEqual({ status: 'full' });
    expect((await store.pending('telegram')).map((p) => p.peerId)).toEqual(['1', '2', '3']);
    // A sender already waiting still gets their code when the queue is full.
    expect(await store.request('telegram', 'default', '2')).toMatchObject({ status: 'existing', request: { peerId: '2' } });
    expect((await store.request('discord', 'default', '4')).status).toBe('created');
    expect(await store.pending()).toHaveLength(4);
  });

  it('an expired code frees its place in the queue and is forgotten; a new one is issued', async () => {
    const { store, clock } = memoryStore();
    const old = await created(store, 'telegram', '1');
    clock.advance(10);
    for (const id of ['2', '3']) await created(store, 'telegram', id);
    clock.set(T0 + HOUR - 1);
    expect((await store.pending('telegram')).map((p) => p.peerId)).toEqual(['1', '2', '3']);
    clock.set(T0 + HOUR); // the first code's expiry instant: expired
    expect((await store.pending('telegram')).map((p) => p.peerId)).toEqual(['2', '3']);
    const fresh = await created(store, 'telegram', '1');
    expect(fresh.createdAt).toBe(T0 + HOUR);
    expect(fresh.expiresAt).toBe(T0 + 2 * HOUR);
    await expect(store.approve('telegram', old.code === fresh.code ? 'ZZZZZZZZ' : old.code)).rejects.toThrow(NotFoundError);
  });

  it('pending lists oldest first, per channel or all', async () => {
    const { store, clock } = memoryStore();
    await created(store, 'slack', 'b');
    clock.advance(5);
    await created(store, 'telegram', 'a');
    clock.advance(5);
    await created(store, 'slack', 'c');
    expect((await store.pending()).map((p) => p.peerId)).toEqual(['b', 'a', 'c']);
    expect((await store.pending('slack')).map((p) => p.peerId)).toEqual(['b', 'c']);
    expect(await store.pending('discord')).toEqual([]);
  });
});

describe('PairingStore: approve and revoke', () => {
  it('approve pairs the peer (code case and spaces ignored) and uses up the code', async () => {
    const { store, clock } = memoryStore();
    const r = await created(store, 'telegram', '42', 'Alice');
    clock.advance(1000);
    expect(await store.isPaired('telegram', '42')).toBe(false);
    const peer = await store.approve('telegram', ` ${r.code.toLowerCase()} `);
    expect(peer).toEqual({ channel: 'telegram', peerId: '42', name: 'Alice', approvedAt: T0 + 1000 });
    expect(await store.isPaired('telegram', '42')).toBe(true);
    expect(await store.isPaired('discord', '42')).toBe(false);
    expect(await store.isPaired('telegram', '43')).toBe(false);
    expect(await store.pending()).toEqual([]);
    expect(await store.paired()).toEqual([peer]);
    await expect(store.approve('telegram', r.code)).rejects.toMatchObject({ code: 'PAIRING_CODE_UNKNOWN' });
  });

  it('a code works on its own channel only', async () => {
    const { store } = memoryStore();
    const r = await created(store, 'telegram', '42');
    await expect(store.approve('discord', r.code)).rejects.toThrow(NotFoundError);
    expect(await store.isPaired('discord', '42')).toBe(false);
  });

  it('a code cannot be approved at or after its expiry', async () => {
    const { store, clock } = memoryStore();
    const r = await created(store, 'telegram', '42');
    clock.set(r.expiresAt);
    await expect(store.approve('telegram', r.code)).rejects.toThrow(/expired/);
    expect(await store.isPaired('telegram', '42')).toBe(false);
  });

  it('a code approved one millisecond before expiry works', async () => {
    const { store, clock } = memoryStore();
    const r = await created(store, 'telegram', '42');
    clock.set(r.expiresAt - 1);
    await store.approve('telegram', r.code);
    expect(await store.isPaired('telegram', '42')).toBe(true);
  });

  it('revoke removes the peer on that channel only and says whether there was one', async () => {
    const { store } = memoryStore();
    await store.approve('telegram', (await created(store, 'telegram', '42')).code);
    await store.approve('slack', (await created(store, 'slack', '42')).code);
    expect(await store.revoke('telegram', '42')).toBe(true);
    expect(await store.revoke('telegram', '42')).toBe(false);
    expect(await store.isPaired('telegram', '42')).toBe(false);
    expect(await store.isPaired('slack', '42')).toBe(true);
    expect((await store.paired('slack')).map((p) => p.peerId)).toEqual(['42']);
    expect(await store.paired('telegram')).toEqual([]);
  });
});

describe('PairingStore on SQLite', () => {
  it('a second store on the same file (the CLI) sees codes and peers of the first (the gateway)', async () => {
    const uri = sqliteUri();
    const clock = new ManualClock(T0);
    const gateway = new PairingStore({ uri, clock });
    stores.push(gateway);
    const r = await created(gateway, 'telegram', '42', 'Alice');
    const cli = new PairingStore({ uri, clock });
    stores.push(cli);
    expect(await cli.pending()).toEqual([r]);
    await cli.approve('telegram', r.code);
    expect(await gateway.isPaired('telegram', '42')).toBe(true);
    clock.advance(2 * HOUR);
    await created(gateway, 'telegram', '43');
    clock.advance(2 * HOUR);
    expect(await cli.pending()).toEqual([]);
    expect(await gateway.pending()).toEqual([]);
  });
});

describe('pairingAdmin', () => {
  const config = (dmScope: 'main' | 'per-peer') => ({
    session: { dmScope, identityLinks: {} },
    channels: {
      telegram: [{ accountId: 'default', enabled: true, dmPolicy: 'pairing', allowFrom: ['7'], groupPolicy: 'open', groups: [], requireMention: false }],
      discord: [], slack: [],
    },
  }) as unknown as Pick<ResolvedConfig, 'channels' | 'session'>;

  it('approving a second person under dmScope main warns that they share one conversation', async () => {
    const { store } = memoryStore();
    const admin = pairingAdmin(store, config('main'));
    const r = await created(store, 'telegram', '42');
    expect((await admin.list()).warning).toBeUndefined();
    const result = await admin.approve('Telegram', r.code);
    expect(result.peer.peerId).toBe('42');
    expect(result.warning).toMatch(/2 different people/);
    expect((await admin.list()).warning).toMatch(/share ONE conversation/);
  });

  it('no warning under per-peer', async () => {
    const { store } = memoryStore();
    const admin = pairingAdmin(store, config('per-peer'));
    const result = await admin.approve('telegram', (await created(store, 'telegram', '42')).code);
    expect(result).not.toHaveProperty('warning');
    expect(await admin.list()).toEqual({ pending: [], paired: [result.peer] });
  });

  it('revoke through the admin names the channel case-insensitively; an unknown channel is a 400 with a guess', async () => {
    const { store } = memoryStore();
    const admin = pairingAdmin(store, config('per-peer'));
    await admin.approve('telegram', (await created(store, 'telegram', '42')).code);
    expect(await admin.revoke(' TELEGRAM ', '42')).toBe(true);
    expect(await store.isPaired('telegram', '42')).toBe(false);
    expect(() => requirePairingChannel('telegran')).toThrow('Unknown channel "telegran" (did you mean "telegram"?): pairing works on telegram, discord, slack.');
    expect(() => requirePairingChannel('webchat')).toThrow(/^Unknown channel "webchat": pairing works on telegram, discord, slack\.$/);
    await expect(admin.approve('webchat', 'X')).rejects.toMatchObject({ status: 400, code: 'unknown_channel' });
  });
});

describe('PairingStore: order and closing', () => {
  it('pending is sorted by creation time, not by storage order', async () => {
    const { store, clock } = memoryStore();
    clock.set(T0 + 5000);
    await created(store, 'telegram', 'late');
    clock.set(T0 + 1000);
    await created(store, 'telegram', 'early');
    clock.set(T0 + 3000);
    await created(store, 'telegram', 'middle');
    expect((await store.pending()).map((p) => p.peerId)).toEqual(['early', 'middle', 'late']);
  });

  it('close releases the SQLite file: the store is not usable afterwards', async () => {
    const store = new PairingStore({ uri: sqliteUri(), clock: new ManualClock(T0) });
    await created(store, 'telegram', '42');
    await store.close();
    await expect(store.pending()).rejects.toThrow();
  });
});
