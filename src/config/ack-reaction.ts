import { z } from 'zod';

const emoji = z.string().max(64);

/**
 * `channels.<platform>.ackReaction` (SPEC §16): the reaction put on a received message when its turn starts.
 * A string is the reaction of group and channel messages (direct messages get none); `{ direct, group }` sets
 * each chat type; `""` is none.
 */
export const ackReactionSetting = z.union([
  emoji,
  z.strictObject({
    /** Direct messages (default none). */
    direct: emoji.optional(),
    /** Groups and channels, and their threads (default 👀). */
    group: emoji.optional(),
  }),
]).optional();

export type AckReactionSetting = z.infer<typeof ackReactionSetting>;

/** The ack reaction of one account per chat type; `""` is none. */
export interface AckReactionConfig {
  direct: string;
  group: string;
}

/** SPEC §16 defaults: 👀 on group messages that trigger a run, none in direct messages. */
export const DEFAULT_ACK_REACTION: AckReactionConfig = { direct: '', group: '👀' };

/** The account's setting over the channel's, over the defaults (first the most specific). */
export function resolveAckReaction(...settings: AckReactionSetting[]): AckReactionConfig {
  const out = { ...DEFAULT_ACK_REACTION };
  for (const setting of [...settings].reverse()) {
    if (setting === undefined) continue;
    if (typeof setting === 'string') {
      out.group = setting;
      continue;
    }
    if (setting.direct !== undefined) out.direct = setting.direct;
    if (setting.group !== undefined) out.group = setting.group;
  }
  return out;
}
