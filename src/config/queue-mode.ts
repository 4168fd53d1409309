import { z } from 'zod';

/**
 * What a session does with a message that arrives while it is busy (SPEC §16, "Queue modes"):
 * `followup` each message its own turn, in order; `collect` a debounced burst (and what arrives while a turn runs)
 * answered in one turn; `steer` joins the running turn at its next tool-call boundary; `interrupt` stops the
 * running turn and starts a new one.
 */
export type QueueMode = 'followup' | 'collect' | 'steer' | 'interrupt';

/** The queue modes, as the config names them. */
export const QUEUE_MODES = ['followup', 'collect', 'steer', 'interrupt'] as const satisfies readonly QueueMode[];

/** `messages.queue.mode` and `channels.<platform>.queueMode`. */
export const queueModeSetting = z.enum(QUEUE_MODES);

/** The top-level `messages` key. */
export const messagesSchema = z.strictObject({
  queue: z.strictObject({
    /** The mode of every channel without its own `queueMode`. */
    mode: queueModeSetting.default('followup'),
    /** `collect`: messages of one session this close together (ms) are one burst. */
    debounceMs: z.number().int().min(0).max(60_000).default(1500),
  }).prefault({}),
});

/** The queue settings the gateway runs with: the default mode, the debounce, and each channel's own mode. */
export interface QueueConfig {
  mode: QueueMode;
  debounceMs: number;
  /** `channels.<platform>.queueMode` where set (`telegram`, `discord`, `slack`, `webchat`). */
  byChannel: Partial<Record<string, QueueMode>>;
}

/** Resolved `messages` (SPEC §16). */
export interface MessagesConfig {
  queue: QueueConfig;
}

/** Merges `messages.queue` with the channels' own `queueMode`. */
export function resolveMessages(
  messages: z.output<typeof messagesSchema>, channels: Record<string, { queueMode?: QueueMode | undefined }>,
): MessagesConfig {
  const byChannel: Partial<Record<string, QueueMode>> = {};
  for (const [channel, settings] of Object.entries(channels)) if (settings.queueMode) byChannel[channel] = settings.queueMode;
  return { queue: { mode: messages.queue.mode, debounceMs: messages.queue.debounceMs, byChannel } };
}
