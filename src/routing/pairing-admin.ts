import type { ResolvedConfig } from '../config/resolved.ts';
import { didYouMean } from '../core/did-you-mean.ts';
import { BadRequestError } from '../core/errors.ts';
import { dmScopeWarning } from './dm-scope-warning.ts';
import type { PairedPeer, PairingRequest, PairingStore } from './pairing.ts';

/** Channels with DM pairing. */
export const PAIRING_CHANNELS = ['telegram', 'discord', 'slack'] as const;

/** The channel name, or a 400 that says which names exist (and the likely one). */
export function requirePairingChannel(channel: string): string {
  const name = channel.trim().toLowerCase();
  if ((PAIRING_CHANNELS as readonly string[]).includes(name)) return name;
  const guess = didYouMean(name, PAIRING_CHANNELS);
  throw new BadRequestError(`Unknown channel "${channel}"${guess ? ` (did you mean "${guess}"?)` : ''}: pairing works on ${PAIRING_CHANNELS.join(', ')}.`, 'unknown_channel');
}

/** What `switchboard pairing` and `/admin/pairing` do, on one pairing store. */
export interface PairingAdmin {
  list(): Promise<{ pending: PairingRequest[]; paired: PairedPeer[]; warning?: string }>;
  /** Approves a code; `warning` when this puts a second person into the shared `main` DM session. */
  approve(channel: string, code: string): Promise<{ peer: PairedPeer; warning?: string }>;
  revoke(channel: string, peerId: string): Promise<boolean>;
}

export function pairingAdmin(store: PairingStore, config: Pick<ResolvedConfig, 'channels' | 'session'>): PairingAdmin {
  return {
    async list() {
      const [pending, paired] = [await store.pending(), await store.paired()];
      const warning = dmScopeWarning(config, paired);
      return { pending, paired, ...(warning ? { warning } : {}) };
    },
    async approve(channel, code) {
      const peer = await store.approve(requirePairingChannel(channel), code);
      const warning = dmScopeWarning(config, await store.paired());
      return { peer, ...(warning ? { warning } : {}) };
    },
    async revoke(channel, peerId) {
      return store.revoke(requirePairingChannel(channel), peerId);
    },
  };
}
