import { randomInt } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import Keyv, { type KeyvStoreAdapter } from 'keyv';
import KeyvSqlite from '@keyv/sqlite';
import type { Clock } from '../core/clock.ts';
import { NotFoundError, SwitchboardError } from '../core/errors.ts';

/** A pairing request waiting for `switchboard pairing approve`. */
export interface PairingRequest {
  channel: string;
  accountId: string;
  peerId: string;
  name?: string;
  code: string;
  createdAt: number;
  expiresAt: number;
}

/** A peer allowed by pairing. */
export interface PairedPeer {
  channel: string;
  peerId: string;
  name?: string;
  approvedAt: number;
}

/** Outcome of a pairing request. */
export type PairingOutcome =
  | { status: 'created' | 'existing'; request: PairingRequest }
  | { status: 'full' };

const CODE_ALPHABET = 'ABCDEFGHJKLMNPQRSTUVWXYZ23456789';
const CODE_TTL_MS = 3_600_000;
const MAX_PENDING = 3;

/** What {@link SharedPairingState.requestExclusive} needs to know of the request. */
export interface ExclusivePairingRequest {
  /** The namespaced keyv key prefix of the channel's pending codes (`pairing:code:<channel>:`). */
  prefix: string;
  /** The lock that serializes requests of one channel across processes. */
  lockName: string;
  peerId: string;
  now: number;
  maxPending: number;
  /** A new request with a fresh code (called only when one is created). */
  create: () => PairingRequest;
}

/**
 * Pairing state that several processes issue codes in at once (cluster mode: the PostgreSQL one in
 * `src/cluster/pg-pairing.ts`, built by `src/stores.ts` and passed in).
 */
export interface SharedPairingState {
  /** The keyv storage adapter the `pairing` namespace lives in. */
  readonly adapter: KeyvStoreAdapter;
  /** Finds, refuses or creates a request in one step under a per-channel lock, so "at most 3 pending" holds across processes. */
  requestExclusive(request: ExclusivePairingRequest): Promise<PairingOutcome>;
  /** Closes what the shared state opened (a pool of its own). */
  close(): Promise<void>;
}

/** Options of {@link PairingStore}. */
export interface PairingStoreOptions {
  /** Local state: the session store's `sqlite://…` URI; anything else (or none) keeps it in memory. Unused with `shared`. */
  uri?: string;
  clock: Clock;
  /** State shared with other processes (cluster mode) instead of the local one. */
  shared?: SharedPairingState;
}

/**
 * DM pairing (SPEC §10), in the session store's SQLite file so that the CLI and the running gateway see
 * the same state: an unknown sender gets an 8-character code (valid 1 hour, at most 3 pending per
 * channel); `approve` turns it into a paired peer. With {@link SharedPairingState} (cluster mode) the same
 * keyv namespace lives in the shared store, and a new code is issued through its exclusive request.
 */
export class PairingStore {
  private readonly keyv: Keyv;
  private readonly clock: Clock;
  private readonly shared?: SharedPairingState;

  constructor(options: PairingStoreOptions) {
    this.clock = options.clock;
    if (options.shared) {
      this.shared = options.shared;
      this.keyv = new Keyv({ store: options.shared.adapter, namespace: 'pairing' });
      return;
    }
    const uri = options.uri ?? 'memory';
    if (uri.startsWith('sqlite://') && !uri.endsWith(':memory:')) {
      mkdirSync(path.dirname(path.resolve(uri.slice('sqlite://'.length))), { recursive: true });
    }
    const store = uri.startsWith('sqlite://') ? new KeyvSqlite({ uri, table: 'keyv', keySize: 1024, busyTimeout: 5000 }) : undefined;
    this.keyv = new Keyv({ store: store ?? new Map(), namespace: 'pairing' });
  }

  async isPaired(channel: string, peerId: string): Promise<boolean> {
    return Boolean(await this.keyv.get(`peer:${channel}:${peerId}`));
  }

  /** The code of a sender: an existing valid one, a new one, or `full` when 3 are pending. */
  async request(channel: string, accountId: string, peerId: string, name?: string): Promise<PairingOutcome> {
    if (this.shared) {
      const now = this.clock.now();
      return this.shared.requestExclusive({
        prefix: `${this.keyv.namespace}:code:${channel}:`, lockName: `switchboard:pairing:${channel}`, peerId, now, maxPending: MAX_PENDING,
        create: () => ({ channel, accountId, peerId, name, code: newCode(), createdAt: now, expiresAt: now + CODE_TTL_MS }),
      });
    }
    const pending = await this.pending(channel);
    const existing = pending.find((p) => p.peerId === peerId);
    if (existing) return { status: 'existing', request: existing };
    if (pending.length >= MAX_PENDING) return { status: 'full' };
    const now = this.clock.now();
    const request: PairingRequest = { channel, accountId, peerId, name, code: newCode(), createdAt: now, expiresAt: now + CODE_TTL_MS };
    await this.keyv.set(`code:${channel}:${request.code}`, request);
    return { status: 'created', request };
  }

  /** Valid pending requests of a channel (or of all channels). Expired ones are deleted. */
  async pending(channel?: string): Promise<PairingRequest[]> {
    const now = this.clock.now();
    const out: PairingRequest[] = [];
    for await (const [key, value] of this.iterate()) {
      if (!key.startsWith('code:')) continue;
      const request = value as PairingRequest;
      if (request.expiresAt <= now) {
        await this.keyv.delete(key);
        continue;
      }
      if (!channel || request.channel === channel) out.push(request);
    }
    return out.sort((a, b) => a.createdAt - b.createdAt);
  }

  async paired(channel?: string): Promise<PairedPeer[]> {
    const out: PairedPeer[] = [];
    for await (const [key, value] of this.iterate()) {
      if (key.startsWith('peer:') && (!channel || (value as PairedPeer).channel === channel)) out.push(value as PairedPeer);
    }
    return out;
  }

  /** Approves a code. Throws NotFoundError when it is unknown or expired. */
  async approve(channel: string, code: string): Promise<PairedPeer> {
    const key = `code:${channel}:${code.trim().toUpperCase()}`;
    const request = (await this.keyv.get(key)) as PairingRequest | undefined;
    if (!request || request.expiresAt <= this.clock.now()) {
      throw new NotFoundError(`No pending pairing code ${code} on ${channel}: it may have expired (codes last 1 hour). Run "switchboard pairing list".`, 'PAIRING_CODE_UNKNOWN');
    }
    const peer: PairedPeer = { channel, peerId: request.peerId, name: request.name, approvedAt: this.clock.now() };
    await this.keyv.set(`peer:${channel}:${request.peerId}`, peer);
    await this.keyv.delete(key);
    return peer;
  }

  /** Removes a paired peer. */
  async revoke(channel: string, peerId: string): Promise<boolean> {
    return this.keyv.delete(`peer:${channel}:${peerId}`);
  }

  async close(): Promise<void> {
    await this.keyv.disconnect();
    await this.shared?.close();
  }

  private async *iterate(): AsyncGenerator<[string, unknown]> {
    if (!this.keyv.iterator) throw new SwitchboardError('STORE_UNSUPPORTED', 'This store cannot list pairing requests.');
    // Keyv gives the keys without its namespace (`pairing:`).
    yield* this.keyv.iterator(this.keyv.namespace) as AsyncGenerator<[string, unknown]>;
  }
}

function newCode(): string {
  let code = '';
  for (let i = 0; i < 8; i++) code += CODE_ALPHABET[randomInt(CODE_ALPHABET.length)];
  return code;
}
