import { isValidTimeZone } from '../config/schema.ts';
import { totalTokens } from '../sessions/entry.ts';
import type { ChatCommand, CommandRegistry } from './commands.ts';
import { hostZone } from './reset-text.ts';

const n = (value: number) => value.toLocaleString('en-US');

/** `/status`, `/usage`, `/stop`, `/timezone`, `/model`, `/goal`, `/help`; `/new` and `/reset` are reset triggers. */
export function registerBuiltinCommands(registry: CommandRegistry): void {
  const commands: ChatCommand[] = [
    {
      name: 'status',
      description: 'model, context used, compactions, session key and id, token totals',
      immediate: true,
      async run({ session, services }) {
        const e = session.entry;
        const { model, providerId, contextWindow } = services.modelOf(e);
        const pct = contextWindow ? Math.round((e.contextTokens / contextWindow) * 100) : 0;
        const running = services.isRunning(e.key);
        const queued = services.queueDepth(e.key);
        return [
          `**Status** · ${e.key}`,
          `• session id: ${e.sessionId}`,
          `• model: ${model} (provider ${providerId})`,
          `• context: ${n(e.contextTokens)} / ${n(contextWindow)} tokens (${pct}%)`,
          `• compactions: ${e.compactionCount}`,
          `• tokens: input ${n(e.tokens.input)} · output ${n(e.tokens.output)} · cache read ${n(e.tokens.cacheRead)} · cache write ${n(e.tokens.cacheWrite)} · total ${n(totalTokens(e.tokens))}`,
          `• messages: ${e.messageCount} since ${new Date(e.sessionStartedAt).toISOString().slice(0, 16).replace('T', ' ')} UTC`,
          `• reset: ${services.describeReset(e)}`,
          `• turn: ${running ? 'running' : 'idle'}${queued ? `, ${queued} queued` : ''}`,
        ].join('\n');
      },
    },
    {
      name: 'usage',
      description: 'token totals of this session',
      async run({ session }) {
        const t = session.entry.tokens;
        return [
          `**Usage** · ${session.entry.key}`,
          `• input: ${n(t.input)}`,
          `• output: ${n(t.output)}`,
          `• cache read: ${n(t.cacheRead)}`,
          `• cache write: ${n(t.cacheWrite)}`,
          `• total: ${n(totalTokens(t))}`,
        ].join('\n');
      },
    },
    {
      name: 'stop',
      description: 'stop the running turn (queued messages stay)',
      immediate: true,
      async run({ session, services }) {
        const queued = services.queueDepth(session.key);
        const tail = queued ? ` ${queued} queued message${queued === 1 ? '' : 's'} will still be answered.` : '';
        return services.stopTurn(session.key) ? `Stopped.${tail}` : `Nothing is running.${tail}`;
      },
    },
    {
      name: 'timezone',
      description: "set this session's time zone for the daily reset",
      usage: '/timezone <IANA zone, e.g. Europe/Berlin>',
      async run({ session, args, services }) {
        const e = session.entry;
        if (!args) return `Time zone: ${e.overrides.timezone ?? `${services.config.session.reset.timezone ?? hostZone()} (default)`}. Set one with /timezone <IANA zone>, e.g. /timezone Europe/Berlin.`;
        if (!isValidTimeZone(args)) return `"${args}" is not an IANA time zone. Try a name like Europe/Berlin, America/New_York or UTC.`;
        const zone = new Intl.DateTimeFormat('en-US', { timeZone: args }).resolvedOptions().timeZone;
        e.overrides = { ...e.overrides, timezone: zone };
        await services.save(e);
        return `Time zone set to ${zone}. Daily reset: ${services.describeReset(e)}.`;
      },
    },
    {
      name: 'model',
      description: 'show or set the model of this session',
      usage: '/model [name|default]',
      async run({ session, args, services }) {
        const e = session.entry;
        if (!args) return `Model: ${services.modelOf(e).model}. Change it with /model <name>, or /model default.`;
        e.overrides = { ...e.overrides, model: args === 'default' ? undefined : args };
        await services.save(e);
        return `Model set to ${services.modelOf(e).model}.`;
      },
    },
    {
      name: 'goal',
      description: 'set a standing goal for this conversation',
      usage: '/goal <text> | off',
      async run({ session, args, services }) {
        const e = session.entry;
        if (!args) return e.overrides.goal ? `Goal: ${e.overrides.goal}` : 'No goal set. Set one with /goal <text>.';
        e.overrides = { ...e.overrides, goal: args.toLowerCase() === 'off' ? undefined : args };
        await services.save(e);
        return e.overrides.goal ? `Goal set: ${e.overrides.goal}` : 'Goal cleared.';
      },
    },
  ];
  for (const command of commands) registry.register(command);
  registry.register({
    name: 'help',
    description: 'list the commands',
    async run({ services }) {
      const triggers = services.config.session.resetTriggers.map((t) => `${t} [text] — start a new session`);
      const lines = registry.list().map((c) => `${c.usage ?? `/${c.name}`} — ${c.description}`);
      return ['**Commands**', ...triggers, ...lines].join('\n');
    },
  });
}

/**
 * Gateway-wide figures for `/status` and `/usage`: the very objects `GET /status` and `GET /usage` answer,
 * so the chat commands and the routes always show the same numbers.
 */
export interface GatewayFigures {
  status(): Promise<{
    version: string;
    uptimeSeconds: number;
    sessions: { active: number; persisted: number | null };
    queue: { running: number; queued: number };
    providers: readonly { id: string; model: string; requests: number; retries: number; errors: number; totalTokens: number }[];
  }>;
  usage(): {
    totals: { totalTokens: number; llmCalls: number };
    channels: Record<string, { totalTokens: number; llmCalls: number }>;
  };
}

/** Adds the gateway's figures (as `GET /status` and `GET /usage` report them) to `/status` and `/usage`. */
export function registerGatewayCommands(registry: CommandRegistry, figures: GatewayFigures): void {
  const status = registry.get('status');
  const usage = registry.get('usage');
  if (status) {
    registry.register({
      ...status,
      async run(context) {
        const [session, report] = await Promise.all([status.run(context), figures.status()]);
        const stored = report.sessions.persisted === null ? '?' : n(report.sessions.persisted);
        return [
          session,
          `• gateway: v${report.version} · up ${formatUptime(report.uptimeSeconds)} · sessions ${n(report.sessions.active)} active / ${stored} stored · ${report.queue.running} running, ${report.queue.queued} queued`,
          ...report.providers.map((p) => `• provider ${p.id} (${p.model}): ${n(p.requests)} requests · ${n(p.retries)} retries · ${n(p.errors)} errors · ${n(p.totalTokens)} tokens`),
        ].join('\n');
      },
    });
  }
  if (usage) {
    registry.register({
      ...usage,
      async run(context) {
        const session = await usage.run(context);
        const report = figures.usage();
        const channel = context.session.entry.channel;
        const here = report.channels[channel] ?? { totalTokens: 0, llmCalls: 0 };
        return [
          session,
          `• gateway: ${n(report.totals.totalTokens)} tokens in ${n(report.totals.llmCalls)} LLM calls · ${channel}: ${n(here.totalTokens)} tokens in ${n(here.llmCalls)} calls`,
        ].join('\n');
      },
    });
  }
}

export function formatUptime(seconds: number): string {
  const d = Math.floor(seconds / 86_400);
  const h = Math.floor((seconds % 86_400) / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  const s = seconds % 60;
  if (d) return `${d}d ${h}h ${m}m`;
  if (h) return `${h}h ${m}m`;
  return m ? `${m}m ${s}s` : `${s}s`;
}
