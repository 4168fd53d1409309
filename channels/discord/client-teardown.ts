import type { Client } from 'discord.js';
import { withDeadline } from '../../src/core/deadline.ts';

/** A field read that may throw on a malformed message, as a string for logs. */
export function safeString(read: () => unknown): string | undefined {
  try {
    const value = read();
    return typeof value === 'string' ? value : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Destroys a client for good. Works around @discordjs/ws 1.2: destroying a shard while it waits for
 * HELLO or READY (a gateway that does not answer, a reconnect in progress) aborts that wait, whose
 * handler then runs a second, concurrent destroy that leaves the first one pending forever and
 * schedules a reconnect after the client is gone. The waits are detached and reconnects disarmed
 * first (feature-detected: a fixed version skips this), and the wait for the close is bounded.
 */
export async function destroyClient(client: Client, boundMs = 5000): Promise<void> {
  type Shard = { internalConnect?: () => Promise<void>; timeoutAbortControllers?: Map<string, AbortController> };
  const internals = client.ws as unknown as { _ws?: { strategy?: { shards?: Map<number, Shard> } } | null };
  for (const shard of internals._ws?.strategy?.shards?.values() ?? []) {
    if (shard.timeoutAbortControllers instanceof Map) shard.timeoutAbortControllers.clear();
    if (typeof shard.internalConnect === 'function') shard.internalConnect = async () => undefined;
  }
  await withDeadline(client.destroy().catch(() => undefined), boundMs);
}
