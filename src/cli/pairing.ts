import type { ResolvedConfig } from '../config/resolved.ts';
import { systemClock } from '../core/clock.ts';
import { StateLock } from '../core/state-lock.ts';
import { pairingAdmin, type PairingAdmin } from '../routing/pairing-admin.ts';
import { openPairingStore } from '../stores.ts';
import { findCommandTarget } from './gateway-client.ts';

/**
 * Runs a pairing action against the running gateway (`/admin/pairing`), or on the store in-process while
 * holding the state folder's lock when no gateway runs.
 */
export async function withPairingAdmin<T>(config: ResolvedConfig, command: string, fn: (admin: PairingAdmin) => Promise<T>): Promise<T> {
  const target = await findCommandTarget(config);
  if (target.kind === 'gateway') {
    const { client } = target;
    return fn({
      list: () => client.get('/admin/pairing'),
      approve: (channel, code) => client.post('/admin/pairing/approve', { channel, code }),
      revoke: async (channel, peerId) => (await client.post<{ revoked: boolean }>('/admin/pairing/revoke', { channel, peerId })).revoked,
    });
  }
  const lock = await StateLock.acquire(config.stateDir, { role: 'cli', command });
  const store = openPairingStore(config.store, { clock: systemClock });
  try {
    return await fn(pairingAdmin(store, config));
  } finally {
    await store.close();
    await lock.release();
  }
}

/** `switchboard pairing list`. */
export async function pairingList(config: ResolvedConfig, json: boolean, out: NodeJS.WritableStream, err: NodeJS.WritableStream): Promise<void> {
  const { pending, paired, warning } = await withPairingAdmin(config, 'switchboard pairing list', (admin) => admin.list());
  if (json) {
    out.write(`${JSON.stringify({ pending, paired, ...(warning ? { warning } : {}) }, null, 2)}\n`);
    return;
  }
  out.write(pending.length ? 'Pending:\n' : 'No pending pairing requests.\n');
  for (const p of pending) out.write(`  ${p.channel} ${p.code}  peer ${p.peerId}${p.name ? ` (${p.name})` : ''}  expires ${new Date(p.expiresAt).toISOString()}\n`);
  if (paired.length) out.write('Paired:\n');
  for (const p of paired) out.write(`  ${p.channel} ${p.peerId}${p.name ? ` (${p.name})` : ''}  since ${new Date(p.approvedAt).toISOString()}\n`);
  if (warning) err.write(`warning: ${warning}\n`);
}

/** `switchboard pairing approve <channel> <code>`. */
export async function pairingApprove(config: ResolvedConfig, channel: string, code: string, out: NodeJS.WritableStream, err: NodeJS.WritableStream): Promise<void> {
  const { peer, warning } = await withPairingAdmin(config, 'switchboard pairing approve', (admin) => admin.approve(channel, code));
  out.write(`Approved ${peer.channel} peer ${peer.peerId}${peer.name ? ` (${peer.name})` : ''}. Their next message goes through.\n`);
  if (warning) err.write(`warning: ${warning}\n`);
}

/** `switchboard pairing revoke <channel> <peer>`; false when the peer was not paired. */
export async function pairingRevoke(config: ResolvedConfig, channel: string, peer: string, out: NodeJS.WritableStream): Promise<boolean> {
  const removed = await withPairingAdmin(config, 'switchboard pairing revoke', (admin) => admin.revoke(channel, peer));
  out.write(removed ? `Revoked ${channel} peer ${peer}.\n` : `${channel} peer ${peer} was not paired.\n`);
  return removed;
}
