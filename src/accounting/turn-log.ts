import type { TurnObserver } from '../agent/turn-events.ts';
import type { Logger } from '../core/logger.ts';
import { plural } from '../core/plural.ts';

/**
 * One `info` line per turn, for operators: correlation id, channel, session key, duration, tokens and
 * outcome (`replied`, `command`, `failed`, `stopped`, ...). Subscribe it to `runtime.events`.
 */
export function turnLogObserver(logger: Logger): TurnObserver {
  return {
    onTurnEnd(event) {
      // Built only when it will be written: every turn passes here.
      if (!logger.isLevelEnabled('info')) return;
      const u = event.usage;
      const total = u.inputTokens + u.outputTokens + u.cacheReadTokens + u.cacheWriteTokens;
      logger.info({
        correlationId: event.correlationId, channel: event.channel, sessionKey: event.sessionKey, sessionId: event.sessionId,
        durationMs: event.durationMs, outcome: event.outcome,
        tokens: { input: u.inputTokens, output: u.outputTokens, cacheRead: u.cacheReadTokens, cacheWrite: u.cacheWriteTokens, total },
      }, `turn ${event.outcome} in ${event.durationMs} ms, ${plural(total, 'token')}`);
    },
  };
}
