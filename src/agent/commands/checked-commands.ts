import { formatCount, plural } from '../../core/plural.ts';
import type { CommandRegistry } from './commands.ts';

/** The token sums `/usage` shows (the ledger's totals have these and more). */
export interface UsageSums {
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
  totalTokens: number;
  llmCalls: number;
}

/** What {@link registerCheckedCommands} reads. */
export interface CheckedCommandSources {
  /** Token totals of a session key across its resets (from the ledger; async in cluster mode). */
  keyTotals(sessionKey: string): (UsageSums & { sessions: number }) | Promise<UsageSums & { sessions: number }>;
  /** Token totals of one session id of a key (from the ledger; async in cluster mode). */
  sessionTotals(sessionKey: string, sessionId: string): UsageSums | Promise<UsageSums>;
}

const breakdown = (t: UsageSums) => `input ${formatCount(t.inputTokens)} · output ${formatCount(t.outputTokens)} · cache read ${formatCount(t.cacheReadTokens)} · cache write ${formatCount(t.cacheWriteTokens)} · total ${formatCount(t.totalTokens)}`;

/**
 * Makes `/usage` honest: it shows the current session's totals and, apart, the session key's totals across
 * resets. Wraps the registered command, so it runs after it.
 */
export function registerCheckedCommands(registry: CommandRegistry, sources: CheckedCommandSources): void {
  const usage = registry.get('usage');
  if (usage) {
    registry.register({
      ...usage,
      async run(context) {
        // The entry's totals are the key's across resets; this session's own come from the ledger.
        const gatewayLines = (await usage.run(context)).split('\n').filter((line) => /^• (gateway|heartbeat|job [^:]+):/.test(line));
        const { key, sessionId, sessionStartedAt } = context.session.entry;
        const [session, all] = await Promise.all([sources.sessionTotals(key, sessionId), sources.keyTotals(key)]);
        const since = new Date(sessionStartedAt).toISOString().slice(0, 16).replace('T', ' ');
        return [
          `**Usage** · ${key}`,
          `• this session (since ${since} UTC, ${plural(session.llmCalls, 'LLM call')}): ${breakdown(session)}`,
          `• across resets (${plural(all.sessions, 'session')}, ${plural(all.llmCalls, 'LLM call')}): ${breakdown(all)}`,
          ...gatewayLines,
        ].join('\n');
      },
    });
  }
}
