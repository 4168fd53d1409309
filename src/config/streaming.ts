import { z } from 'zod';

/** How a reply is shown while it is written (SPEC §16). */
export type StreamingMode = 'off' | 'partial' | 'progress';

const streamingMode = z.enum(['off', 'partial', 'progress']);

/**
 * `channels.<platform>.streaming`: a mode for every chat type (`"partial"`), per chat type
 * (`{ direct, group }`), or with the cadence too (`{ mode, direct, group, minChars, intervalMs }`).
 */
export const streamingSetting = z.union([
  streamingMode,
  z.strictObject({
    /** The mode of both chat types, unless `direct` or `group` says otherwise. */
    mode: streamingMode.optional(),
    direct: streamingMode.optional(),
    /** Groups and channels (and their threads). */
    group: streamingMode.optional(),
    /** The first part is posted once the answer has this many characters (or after `firstAfterMs`). */
    minChars: z.number().int().min(1).max(4000).optional(),
    /** At most one edit per chat this often (ms). */
    intervalMs: z.number().int().min(100).max(60_000).optional(),
    /** The first part is posted this long after the answer began even when shorter than `minChars` (ms). */
    firstAfterMs: z.number().int().min(0).max(60_000).optional(),
  }),
]).optional();

export type StreamingSetting = z.infer<typeof streamingSetting>;

/** The streaming of one account, every field decided. */
export interface StreamingConfig {
  direct: StreamingMode;
  group: StreamingMode;
  minChars: number;
  intervalMs: number;
  firstAfterMs: number;
}

/** SPEC §16 defaults: partial in direct messages, off in groups and channels, 40 characters or 1 s, one edit a second. */
export const DEFAULT_STREAMING: StreamingConfig = { direct: 'partial', group: 'off', minChars: 40, intervalMs: 1000, firstAfterMs: 1000 };

/** The account's setting over the channel's, over the defaults. */
export function resolveStreaming(...settings: StreamingSetting[]): StreamingConfig {
  const out = { ...DEFAULT_STREAMING };
  for (const setting of settings.reverse()) {
    if (setting === undefined) continue;
    if (typeof setting === 'string') {
      out.direct = setting;
      out.group = setting;
      continue;
    }
    if (setting.mode) { out.direct = setting.mode; out.group = setting.mode; }
    if (setting.direct) out.direct = setting.direct;
    if (setting.group) out.group = setting.group;
    if (setting.minChars !== undefined) out.minChars = setting.minChars;
    if (setting.intervalMs !== undefined) out.intervalMs = setting.intervalMs;
    if (setting.firstAfterMs !== undefined) out.firstAfterMs = setting.firstAfterMs;
  }
  return out;
}

/** The mode for a chat of this type. */
export function streamingModeFor(config: StreamingConfig, chatType: string): StreamingMode {
  return chatType === 'direct' ? config.direct : config.group;
}
