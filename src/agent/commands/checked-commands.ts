import type { Clock } from '../../core/clock.ts';
import { didYouMean } from '../../core/did-you-mean.ts';
import { formatCount, plural } from '../../core/plural.ts';
import type { ProviderRegistry } from '../../providers/registry.ts';
import type { CommandRegistry } from './commands.ts';

/** Model lists are asked once per provider for this long (a failure is asked again next time). */
const MODEL_LIST_TTL_MS = 10 * 60_000;

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
  providers: ProviderRegistry;
  clock: Clock;
  /** Token totals of a session key across its resets (from the ledger; async in cluster mode). */
  keyTotals(sessionKey: string): (UsageSums & { sessions: number }) | Promise<UsageSums & { sessions: number }>;
  /** Token totals of one session id of a key (from the ledger; async in cluster mode). */
  sessionTotals(sessionKey: string, sessionId: string): UsageSums | Promise<UsageSums>;
}

const breakdown = (t: UsageSums) => `input ${formatCount(t.inputTokens)} · output ${formatCount(t.outputTokens)} · cache read ${formatCount(t.cacheReadTokens)} · cache write ${formatCount(t.cacheWriteTokens)} · total ${formatCount(t.totalTokens)}`;

/** Asks a provider for its models, cached; `undefined` with a reason when it cannot be asked. */
function modelLister(sources: CheckedCommandSources) {
  const cache = new Map<string, { at: number; models: string[] }>();
  return async (providerId: string): Promise<{ models?: string[]; reason?: string }> => {
    const cached = cache.get(providerId);
    if (cached && sources.clock.now() - cached.at < MODEL_LIST_TTL_MS) return { models: cached.models };
    const provider = sources.providers.get(providerId);
    if (!provider?.listModels) return { reason: `provider ${providerId} cannot list its models` };
    try {
      const models = await provider.listModels(AbortSignal.timeout(10_000));
      if (!models.length) return { reason: `provider ${providerId} listed no models` };
      cache.set(providerId, { at: sources.clock.now(), models });
      return { models };
    } catch (error) {
      return { reason: `provider ${providerId} did not answer the model list (${(error as Error).message.split('\n')[0]})` };
    }
  };
}

/**
 * Makes `/model` and `/usage` honest: `/model <name>` is refused when the provider does not list that model
 * (and says so when the list could not be read); `/usage` shows the current session's totals and,
 * apart, the session key's totals across resets. Wraps the registered commands, so it runs after them.
 */
export function registerCheckedCommands(registry: CommandRegistry, sources: CheckedCommandSources): void {
  const model = registry.get('model');
  const usage = registry.get('usage');
  const listModels = modelLister(sources);
  if (model) {
    registry.register({
      ...model,
      async run(context) {
        const wanted = context.args.trim();
        if (!wanted || wanted === 'default') return model.run(context);
        const { providerId } = context.services.modelOf(context.session.entry);
        const { models, reason } = await listModels(providerId);
        if (models && !models.includes(wanted)) {
          const guess = didYouMean(wanted, models);
          const some = models.slice(0, 8).join(', ');
          return `Model "${wanted}" is not offered by provider ${providerId}${guess ? ` (did you mean "${guess}"?)` : ''}; nothing changed. It lists ${plural(models.length, 'model')}: ${some}${models.length > 8 ? ', …' : ''}.`;
        }
        const answer = await model.run(context);
        return reason ? `${answer}\n(Could not check that it exists: ${reason}.)` : answer;
      },
    });
  }
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
