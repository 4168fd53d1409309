import type { TurnEvents } from '../agent/turn-events.ts';
import type { ResolvedConfig } from '../config/resolved.ts';
import { DEFAULT_STREAMING, streamingModeFor, type StreamingConfig, type StreamingMode } from '../config/streaming.ts';
import type { ChannelAdapter } from '../core/channel-adapter.ts';
import type { Clock } from '../core/clock.ts';
import type { Logger } from '../core/logger.ts';
import { targetOf, type InboundMessage, type OutboundMessage } from '../core/message.ts';
import { LiveReply, systemTimers, type ChatPace, type LiveTimers } from './live-reply.ts';

/** The status lines of `progress` (SPEC §16). */
export const THINKING = 'thinking…';
export function runningLine(tools: readonly string[]): string {
  return `running ${[...new Set(tools)].join(', ')}…`;
}

/** One turn's live reply, as the gateway's lane sees it. */
export interface LiveTurn {
  readonly mode: 'partial' | 'progress';
  /** `partial`: the runtime's text deltas. */
  readonly onDelta?: (text: string) => void;
  /** The reply shown live (posts, edits, time to first text). */
  readonly reply: LiveReply;
  /** Makes `reply` the complete answer; false when nothing was posted (send it the ordinary way). */
  finish(reply: OutboundMessage): Promise<boolean>;
  /** The turn ended without an answer to show here (failed, stopped): the live reply stops where it is. */
  abandon(): Promise<void>;
}

/** Options of {@link LiveTurns}. */
export interface LiveTurnsOptions {
  config: ResolvedConfig;
  clock: Clock;
  timers?: LiveTimers;
  /** The runtime's turn events (tool calls for `progress`). */
  events?: TurnEvents;
  logger: Logger;
}

/**
 * Starts the live reply of a turn where its channel streams (SPEC §16: `channels.<platform>.streaming`,
 * `partial` in direct messages and `off` in groups by default) and the platform has post-and-edit calls.
 */
export class LiveTurns {
  private readonly pace: ChatPace = new Map();

  constructor(private readonly options: LiveTurnsOptions) {}

  /** The streaming settings of the account a message came through (the defaults for other channels). */
  streamingOf(message: InboundMessage): StreamingConfig {
    const accounts = (this.options.config.channels as unknown as Record<string, { accountId: string; streaming?: StreamingConfig }[] | undefined>)[message.channel];
    const account = Array.isArray(accounts) ? accounts.find((a) => a.accountId === message.accountId) : undefined;
    return account?.streaming ?? DEFAULT_STREAMING;
  }

  /** The mode this message's turn streams in. */
  modeOf(message: InboundMessage): StreamingMode {
    return streamingModeFor(this.streamingOf(message), message.chatType);
  }

  /**
   * The live reply of a turn, or undefined when this chat does not stream (internal messages, ephemeral API
   * turns, a channel without post-and-edit calls, mode `off`). `posted`: ids a replay found journaled.
   */
  start(
    message: InboundMessage, correlationId: string, adapter: ChannelAdapter | undefined, logger: Logger,
    posted?: readonly string[], onPosted?: (ids: readonly string[]) => Promise<void>,
  ): LiveTurn | undefined {
    if (!adapter?.live || message.channel === 'internal' || message.ephemeral) return undefined;
    const settings = this.streamingOf(message);
    const mode = streamingModeFor(settings, message.chatType);
    if (mode === 'off') return undefined;
    const target = targetOf(message);
    const reply = new LiveReply({
      calls: adapter.live, target, mode, replyTo: message.id, ...(message.threadId ? { threadId: message.threadId } : {}),
      minChars: settings.minChars, firstAfterMs: settings.firstAfterMs, intervalMs: settings.intervalMs,
      clock: this.options.clock, timers: this.options.timers ?? systemTimers, pace: this.pace,
      ...(posted?.length ? { posted } : {}), ...(onPosted ? { onPosted } : {}), logger,
    });
    const unsubscribe = mode === 'progress' ? this.followTools(reply, correlationId) : () => undefined;
    if (mode === 'progress') reply.setStatus(THINKING);
    return {
      mode, reply,
      ...(mode === 'partial' ? { onDelta: (text: string) => reply.append(text) } : {}),
      finish: (final) => { unsubscribe(); return reply.finish(final); },
      abandon: () => { unsubscribe(); return reply.abandon(); },
    };
  }

  /** `progress`: "running <tool>…" while the turn's tools run, "thinking…" while the model works. */
  private followTools(reply: LiveReply, correlationId: string): () => void {
    const events = this.options.events;
    if (!events) return () => undefined;
    let running = 0;
    return events.subscribe({
      onLlmCall: (event) => {
        if (event.correlationId !== correlationId || !event.toolCalls?.length) return;
        running = event.toolCalls.length;
        reply.setStatus(runningLine(event.toolCalls));
      },
      onToolCall: (event) => {
        if (event.correlationId !== correlationId) return;
        running = Math.max(0, running - 1);
        if (running === 0) reply.setStatus(THINKING);
      },
    });
  }
}
