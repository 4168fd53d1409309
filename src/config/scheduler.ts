import { z } from 'zod';

/** Where a job's answer goes (SPEC §17): a platform chat, named by peer (a DM) or group (a group or channel). */
export const deliverToSchema = z.strictObject({
  channel: z.enum(['telegram', 'discord', 'slack', 'webchat']),
  accountId: z.string().min(1).default('default'),
  /** A person: the DM with them (Telegram user id, Discord user or DM channel id, Slack user or IM id, web chat name). */
  peer: z.string().min(1).optional(),
  /** A group, channel or chat id (Telegram group, Discord channel, Slack channel). */
  group: z.string().min(1).optional(),
  /** A thread or forum topic inside the group. */
  threadId: z.string().min(1).optional(),
}).refine((d) => Boolean(d.peer) !== Boolean(d.group), { message: 'name exactly one of peer and group' });
export type DeliverToConfig = z.output<typeof deliverToSchema>;

/** Letters, digits, - and _ (a job id is part of a session key: `agent:<id>:job:<jobId>`). */
export const jobId = z.string().regex(/^[a-z0-9][a-z0-9_-]{0,63}$/i, 'expected letters, digits, - and _ (at most 64)');

/** One scheduled job (SPEC §17), as the config and the tool write it. */
export const jobSchema = z.strictObject({
  id: jobId,
  /** A cron expression (5 or 6 fields), `every 30m` (s, m, h, d), or an ISO time for a one-off. */
  schedule: z.string().min(1),
  /** IANA time zone of a cron expression or of an ISO time without offset (default: the host's). */
  timezone: z.string().min(1).optional(),
  prompt: z.string().min(1).max(20_000),
  agentId: z.string().min(1).optional(),
  deliverTo: deliverToSchema,
  /** `isolated` (default): `agent:<agentId>:job:<jobId>`; or a session key the turn runs in. */
  session: z.string().min(1).default('isolated'),
  /** Input + output tokens one run may use. */
  tokenBudget: z.number().int().positive().default(50_000),
  enabled: z.boolean().default(true),
});
export type JobConfig = z.output<typeof jobSchema>;

export const schedulerSchema = z.strictObject({
  /** A schedule that would fire more often than this is refused (at start for config jobs, by the tool and the CLI). */
  minIntervalSeconds: z.number().int().min(1).default(60),
});

/** `heartbeat` (SPEC §17): absent, no heartbeat. */
export const heartbeatSchema = z.strictObject({
  every: z.string().regex(/^\d+\s*[smhd]$/, 'expected a duration such as "30m"'),
  /** `HH:MM-HH:MM` in the agent's session time zone (may wrap past midnight). */
  activeHours: z.string().regex(/^\d{2}:\d{2}-\d{2}:\d{2}$/, 'expected HH:MM-HH:MM').optional(),
  agentId: z.string().min(1).optional(),
  /** A cheaper model for heartbeat turns. */
  model: z.string().min(1).optional(),
});
export type HeartbeatConfig = z.output<typeof heartbeatSchema>;

/** `hooks` (SPEC §17): with a token, `POST /hooks/agent` and `POST /hooks/wake` are on. */
export const hooksSchema = z.strictObject({
  token: z.string().default(''),
});
