import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { HeartbeatConfig } from '../config/scheduler.ts';
import type { InboundSink } from '../core/channel-adapter.ts';
import type { Clock } from '../core/clock.ts';
import type { DeadlineTimers } from '../core/deadline.ts';
import type { Logger } from '../core/logger.ts';
import type { DeliveryTarget, InboundMessage } from '../core/message.ts';
import { parseDuration } from './schedule.ts';

/** The answer that says "nothing to report": not delivered (SPEC §17). */
export const HEARTBEAT_OK = 'HEARTBEAT_OK';

/** Whether a heartbeat's answer has nothing to say: empty, or `HEARTBEAT_OK` (alone, perhaps with punctuation). */
export function isQuietHeartbeat(text: string): boolean {
  // Markup or punctuation around the word ("**HEARTBEAT_OK**", "HEARTBEAT_OK.") still says nothing.
  const trimmed = text.trim().replace(/^[`*_~\s]+|[`*_~.!\s]+$/g, '');
  return trimmed === '' || trimmed.toUpperCase() === HEARTBEAT_OK;
}

/** Whether `HEARTBEAT.md` asks for anything: text beyond headings, HTML comments and blank lines. */
export function hasHeartbeatContent(markdown: string): boolean {
  const withoutComments = markdown.replace(/<!--[\s\S]*?(-->|$)/g, '');
  return withoutComments.split('\n').some((line) => {
    const t = line.trim();
    return t !== '' && !/^#{1,6}(\s|$)/.test(t) && !/^[-*_]{3,}$/.test(t);
  });
}

/** Whether `at` falls inside `HH:MM-HH:MM` (which may wrap past midnight) in `timezone`. */
export function inActiveHours(activeHours: string | undefined, at: number, timezone: string): boolean {
  if (!activeHours) return true;
  const [from, to] = activeHours.split('-').map((hm) => { const [h, m] = hm.split(':').map(Number); return (h ?? 0) * 60 + (m ?? 0); }) as [number, number];
  const parts = new Intl.DateTimeFormat('en-GB', { timeZone: timezone, hour: '2-digit', minute: '2-digit', hourCycle: 'h23' }).formatToParts(at);
  const minute = Number(parts.find((p) => p.type === 'hour')?.value) * 60 + Number(parts.find((p) => p.type === 'minute')?.value);
  return from <= to ? minute >= from && minute < to : minute >= from || minute < to;
}

/** Options of {@link Heartbeat}. */
export interface HeartbeatOptions {
  config: HeartbeatConfig;
  agentId: string;
  /** The agent's workspace, where `HEARTBEAT.md` is. */
  workspace: string;
  /** Where the main session answers (its entry's last delivery target), if it has talked to anyone yet. */
  deliveryTargetOf: (sessionKey: string) => Promise<DeliveryTarget | undefined>;
  sink: () => InboundSink;
  clock: Clock;
  logger: Logger;
  timers?: DeadlineTimers;
  /** Zone of `activeHours` (default: the host's). */
  timezone?: string;
}

/** What one beat did. */
export type BeatOutcome = 'queued' | 'empty' | 'outside_hours' | 'duplicate';

const PROMPT = `Heartbeat: read HEARTBEAT.md in your workspace context and do what it asks now. If nothing needs the user's attention, answer exactly ${HEARTBEAT_OK} and nothing else.`;

/**
 * The heartbeat (SPEC §17): every `every`, inside `activeHours`, a turn in the agent's main session, only when
 * `HEARTBEAT.md` has content (an empty file costs no LLM call), on `model` when set. Its answer goes to the chat the
 * main session last answered, unless it is `HEARTBEAT_OK` or empty. One beat per interval slot: its id names the
 * slot, so a replay or a wake in the same slot is a duplicate.
 */
export class Heartbeat {
  private readonly options: HeartbeatOptions;
  private readonly everyMs: number;
  private timer: unknown;
  private stopped = true;
  /** Beats by outcome since start. */
  readonly counts: Record<BeatOutcome, number> = { queued: 0, empty: 0, outside_hours: 0, duplicate: 0 };

  constructor(options: HeartbeatOptions) {
    this.options = options;
    this.everyMs = parseDuration(options.config.every);
  }

  get sessionKey(): string {
    return `agent:${this.options.agentId}:main`;
  }

  start(): void {
    this.stopped = false;
    this.arm();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer !== undefined) (this.options.timers ?? defaultTimers).clearTimeout(this.timer);
    this.timer = undefined;
  }

  private arm(): void {
    if (this.stopped) return;
    const now = this.options.clock.now();
    const next = (Math.floor(now / this.everyMs) + 1) * this.everyMs;
    this.timer = (this.options.timers ?? defaultTimers).setTimeout(() => {
      void this.beat().catch((err: unknown) => this.options.logger.warn({ err }, 'heartbeat failed')).finally(() => this.arm());
    }, next - now);
  }

  /** One beat now. `wake`: asked for (`POST /hooks/wake`): runs outside `activeHours` too, in a slot of its own. */
  async beat(wake = false): Promise<BeatOutcome> {
    const now = this.options.clock.now();
    const zone = this.options.timezone ?? Intl.DateTimeFormat().resolvedOptions().timeZone;
    if (!wake && !inActiveHours(this.options.config.activeHours, now, zone)) return this.count('outside_hours');
    const file = await readFile(path.join(this.options.workspace, 'HEARTBEAT.md'), 'utf8').catch(() => '');
    if (!hasHeartbeatContent(file)) return this.count('empty');
    const deliverTo = await this.options.deliveryTargetOf(this.sessionKey);
    const slot = wake ? `wake:${now}` : String(Math.floor(now / this.everyMs));
    const message: InboundMessage = {
      id: `heartbeat:${this.options.agentId}:${slot}`, channel: 'internal', accountId: 'default', chatType: 'direct', chatId: this.sessionKey,
      peerId: 'heartbeat', sender: { id: 'heartbeat', name: 'heartbeat' }, text: PROMPT, attachments: [], mentionsBot: true, receivedAt: now,
      internal: { kind: 'heartbeat', sessionKey: this.sessionKey, ...(deliverTo ? { deliverTo } : {}), ...(this.options.config.model ? { model: this.options.config.model } : {}) },
    };
    const submission = await this.options.sink()(message);
    return this.count(submission.status === 'accepted' ? 'queued' : 'duplicate');
  }

  private count(outcome: BeatOutcome): BeatOutcome {
    this.counts[outcome]++;
    return outcome;
  }
}

const defaultTimers: DeadlineTimers = {
  setTimeout: (callback, ms) => { const t = setTimeout(callback, ms); t.unref(); return t; },
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};
