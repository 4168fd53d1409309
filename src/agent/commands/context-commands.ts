import { formatCount, plural } from '../../core/plural.ts';
import { withoutRuntimeLine } from '../../core/runtime-line.ts';
import { BudgetExceededError, isAbortError } from '../../core/errors.ts';
import type { Logger } from '../../core/logger.ts';
import type { ActiveSession } from '../../sessions/manager.ts';
import type { CommandRegistry } from './commands.ts';
import type { CallScope, CompactionOutcome, ContextEngine } from '../context/context-engine.ts';
import { calibrationKey } from '../context/token-calibration.ts';
import { countTokens, encodingFor } from '../../tokens/tokens.ts';
import { zeroUsage } from '../turn-events.ts';


/** `/context [list|detail]` and `/compact [instructions]` (SPEC §6). */
export function registerContextCommands(registry: CommandRegistry, engine: ContextEngine, logger: Logger): void {
  registry.register({
    name: 'context',
    description: 'what the model sees: bootstrap files, tokens by component, window use',
    usage: '/context [list|detail]',
    async run({ session, args }) {
      const mode = args.trim().toLowerCase() || 'list';
      if (mode !== 'list' && mode !== 'detail') return 'Usage: /context [list|detail]';
      return describeContext(engine, session, mode === 'detail');
    },
  });
  registry.register({
    name: 'compact',
    description: 'summarize the older history now (optional instructions for the summary)',
    usage: '/compact [instructions]',
    async run({ session, message, args, correlationId, signal }) {
      const scope: CallScope = {
        correlationId, signal, message, usage: zeroUsage(), state: { estimated: false }, logger: logger.child({ correlationId, sessionKey: session.key }), ephemeral: message.ephemeral,
      };
      let outcome: CompactionOutcome;
      try {
        outcome = await engine.compactNow(session, scope, args || undefined);
      } catch (error) {
        if (isAbortError(error) || signal.aborted) throw error;
        // The budget line already says what happened and how to lift it; "try again later" would not help.
        if (error instanceof BudgetExceededError) return error.message;
        scope.logger.warn({ err: error }, '/compact failed');
        return `Compaction failed: ${(error as Error).message} The session is unchanged; try /compact again later.`;
      }
      return compactionAnswer(outcome);
    },
  });
}

/** The one-line answer of `/compact` and `POST /admin/sessions/:key/compact`. */
export function compactionAnswer(outcome: CompactionOutcome): string {
  if (outcome.compacted) return `Compacted: ${formatCount(outcome.tokensBefore)} → ${formatCount(outcome.tokensAfter)} tokens`;
  if (outcome.reason === 'nothing-to-compact') return `Nothing to compact: the whole history (${formatCount(outcome.tokensBefore)} tokens in context) is within the recent part that is kept verbatim.`;
  if (outcome.reason === 'disabled') return 'Compaction is disabled (agents.defaults.compaction.enabled).';
  return `Compaction failed: ${outcome.error ?? 'unknown error'}. The session is unchanged.`;
}

/** The `/context` report. */
export async function describeContext(engine: ContextEngine, session: ActiveSession, detail: boolean): Promise<string> {
  const entry = session.entry;
  const a = await engine.assemble(session);
  const key = calibrationKey(a.providerId, a.model);
  const calibration = engine.calibration.state(key);
  const pct = (value: number) => (a.contextWindow ? Math.round((value / a.contextWindow) * 100) : 0);
  const c = a.context.components;
  const lines = [
    `**Context** · ${entry.key}`,
    `• model: ${a.model} (${encodingFor(a.model)}) · calibration ×${a.factor.toFixed(2)}${calibration ? ` from ${calibration.samples} call${calibration.samples === 1 ? '' : 's'}` : ' (no reported usage yet)'}`,
    `• used: ${formatCount(entry.contextTokens)} / ${formatCount(a.contextWindow)} tokens (${pct(entry.contextTokens)}%) at the last request · next request ≈ ${formatCount(a.estimate)} (${pct(a.estimate)}%) · compaction above ${formatCount(a.threshold)}`,
    `• compactions: ${entry.compactionCount}${a.context.summary ? ' · history starts with a summary' : ''} · messages in context: ${a.context.kept.length}`,
  ];
  if (a.pruned.trimmed || a.pruned.cleared) lines.push(`• pruning: ${a.pruned.trimmed} old tool result${a.pruned.trimmed === 1 ? '' : 's'} trimmed, ${a.pruned.cleared} cleared (request only)`);
  lines.push(`**Bootstrap files** (${engine.workspaceOf(entry)})`);
  for (const f of a.bootstrap) {
    if (f.status === 'missing') {
      lines.push(`• ${f.name}: MISSING`);
      continue;
    }
    const tokens = countTokens(f.content, a.model);
    const chars = f.status === 'truncated' ? `${formatCount(f.rawChars)} raw → ${formatCount(f.injectedChars)} injected chars${f.cutBy === 'total' ? ' (total budget)' : ''}` : `${formatCount(f.rawChars)} chars`;
    lines.push(`• ${f.name}: ${f.status === 'ok' ? 'OK' : 'TRUNCATED'} · ${chars} · ${plural(tokens, 'token')}`);
  }
  lines.push('**Tokens by component** (next request, our count)');
  lines.push(`• system ${formatCount(c.system)} · bootstrap ${formatCount(c.bootstrap)} · tools ${formatCount(c.tools)} · history ${formatCount(c.history)} · tool results ${formatCount(c.toolResults)} · user input ${formatCount(c.userInput)}${c.images ? ` · images ${formatCount(c.images)}` : ''} · total ${formatCount(a.context.tokens)}`);
  if (!detail) return lines.join('\n');

  lines.push('**Largest messages**');
  const ranked = a.context.messages.map((m, i) => ({ m, i, tokens: a.context.messageTokens[i] ?? 0 }))
    .sort((x, y) => y.tokens - x.tokens || x.i - y.i).slice(0, 8);
  for (const { m, i, tokens } of ranked) {
    const what = i === 0 ? 'system prompt' : m.role === 'tool' ? `tool result${m.toolCallId ? ` ${m.toolCallId}` : ''}` : m.toolCalls?.length ? `assistant → ${m.toolCalls.map((t) => t.name).join(', ')}` : m.role;
    lines.push(`• #${i} ${what} · ${plural(tokens, 'token')} · ${preview(m.role === 'user' ? withoutRuntimeLine(m.content) : m.content)}`);
  }
  lines.push('**Tool schemas**');
  if (a.tools.length === 0) lines.push('• none');
  a.tools.forEach((t, i) => lines.push(`• ${t.name} · ${plural(a.context.toolTokens[i] ?? 0, 'token')}`));
  return lines.join('\n');
}

function preview(text: string): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat ? `"${flat.length > 60 ? `${flat.slice(0, 60)}…` : flat}"` : '(no text)';
}
