import { isValidTimeZone, TOOL_PRESETS } from '../../config/schema.ts';
import { formatCount, plural } from '../../core/plural.ts';
import { targetOf } from '../../core/message.ts';
import { totalTokens, type SessionEntry } from '../../sessions/entry.ts';
import type { ChatCommand, CommandRegistry } from './commands.ts';
import { hostZone } from './reset-text.ts';
import { pauseGoalRun } from '../runs.ts';
import { modelCommand } from './model-command.ts';


/** What `/status` asks of the context engine: whether the session's token budget is below its fixed prompt cost. */
export interface BudgetCheck {
  budgetBelowFixedCost(entry: SessionEntry): Promise<string | undefined>;
}

/** `/status`, `/usage`, `/stop`, `/timezone`, `/model`, `/goal`, `/help`; `/new` and `/reset` are reset triggers. */
export function registerBuiltinCommands(registry: CommandRegistry, budgets?: BudgetCheck): void {
  const commands: ChatCommand[] = [
    {
      name: 'status',
      description: 'model, context used, compactions, session key and id, token totals',
      immediate: true,
      async run({ session, services }) {
        const e = session.entry;
        const { ref, userChosen, fallbacks, contextWindow } = services.modelOf(e);
        const pct = contextWindow ? Math.round((e.contextTokens / contextWindow) * 100) : 0;
        const { running, queued } = await services.turnState(e.key);
        const belowFixedCost = await budgets?.budgetBelowFixedCost(e);
        return [
          `**Status** · ${e.key}`,
          `• session id: ${e.sessionId}`,
          `• agent: ${e.agentId}`,
          `• model: ${ref}${userChosen ? ' (chosen with /model, no fallbacks)' : fallbacks.length ? ` (fallbacks: ${fallbacks.join(', ')})` : ''}`,
          `• context: ${formatCount(e.contextTokens)} / ${formatCount(contextWindow)} tokens (${pct}%)`,
          `• compactions: ${e.compactionCount}`,
          `• tokens: input ${formatCount(e.tokens.input)} · output ${formatCount(e.tokens.output)} · cache read ${formatCount(e.tokens.cacheRead)} · cache write ${formatCount(e.tokens.cacheWrite)} · total ${formatCount(totalTokens(e.tokens))}`,
          `• messages: ${e.messageCount} since ${new Date(e.sessionStartedAt).toISOString().slice(0, 16).replace('T', ' ')} UTC`,
          `• reset: ${services.describeReset(e)}`,
          `• turn: ${running ? 'running' : 'idle'}${queued ? `, ${queued} queued` : ''}`,
          `• run: ${runLine(e, services.config.backgroundExecution.maxBatchesPerGoal)}`,
          ...budgetLine(e, services.config.agents.find((a) => a.id === e.agentId)?.tokenBudget ?? 0),
          ...(belowFixedCost ? [`• ⚠ ${belowFixedCost}`] : []),
          `• tools: ${toolsLine(services.toolsOf(e))}`,
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
          `• input: ${formatCount(t.input)}`,
          `• output: ${formatCount(t.output)}`,
          `• cache read: ${formatCount(t.cacheRead)}`,
          `• cache write: ${formatCount(t.cacheWrite)}`,
          `• total: ${formatCount(totalTokens(t))}`,
        ].join('\n');
      },
    },
    {
      name: 'stop',
      description: 'stop the running turn (queued messages stay)',
      immediate: true,
      async run({ session, services }) {
        const { queued } = await services.turnState(session.key);
        const tail = queued ? ` ${queued} queued message${queued === 1 ? '' : 's'} will still be answered.` : '';
        const stopped = services.stopTurn(session.key);
        const e = session.entry;
        // A background run waiting for its next batch is paused too; "continue" resumes it.
        if (pauseGoalRun(e)) {
          await services.save(e);
          return `Paused the work on the goal (${e.goal}). Say "continue" to resume it, or /goal off to drop it.${tail}`;
        }
        return stopped ? `Stopped.${tail}` : `Nothing is running.${tail}`;
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
    modelCommand,
    {
      name: 'goal',
      description: 'set a standing goal; with background execution on, work on it goes on beyond one batch',
      usage: '/goal <text> | off',
      async run({ session, args, message, services }) {
        const e = session.entry;
        if (!args) return e.goal ? `Goal: ${e.goal} (run: ${runLine(e, services.config.backgroundExecution.maxBatchesPerGoal)})` : 'No goal set. Set one with /goal <text>.';
        if (args.toLowerCase() === 'off') {
          const had = e.goal;
          e.goal = undefined;
          e.goalTarget = undefined;
          // Commands take their turn in order, so no batch runs now: a `running` here is left over from a crash.
          e.runState = 'idle';
          await services.save(e);
          return had ? `Goal cleared (${had}); background work on it ends.` : 'No goal was set.';
        }
        e.goal = args;
        e.goalTarget = targetOf(message);
        // A new goal starts its batch count and run budgets afresh (SPEC §11, §14).
        e.checkpoint = undefined;
        await services.save(e);
        const background = services.config.backgroundExecution.enabled
          ? 'Work on it goes on in the background when it needs more than one batch of steps; /stop pauses it.'
          : 'Background execution is off (backgroundExecution.enabled), so long work stops after each batch until you say "continue".';
        return `Goal set: ${e.goal}\n${background}`;
      },
    },
    {
      name: 'tools',
      description: 'show or set the tool preset of this session',
      usage: `/tools [${TOOL_PRESETS.join('|')}|default]`,
      async run({ session, args, services }) {
        const e = session.entry;
        const wanted = args.toLowerCase();
        if (wanted) {
          if (wanted === 'default') e.overrides = { ...e.overrides, toolPreset: undefined };
          else if ((TOOL_PRESETS as readonly string[]).includes(wanted)) e.overrides = { ...e.overrides, toolPreset: wanted };
          else return `"${args}" is not a tool preset. Presets: ${TOOL_PRESETS.join(', ')} (or default).`;
          await services.save(e);
        }
        const tools = services.toolsOf(e);
        return `${wanted ? 'Tool preset set. ' : ''}Tools: ${toolsLine(tools)}${tools.names.length ? `\n${tools.names.join(', ')}` : ''}\nChange with /tools ${TOOL_PRESETS.join('|')}|default.`;
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

/** `running · goal: … · batch 2/10`, for /status and /goal. */
function runLine(e: SessionEntry, maxBatches: number): string {
  const parts: string[] = [e.runState];
  if (e.goal) parts.push(`goal: ${e.goal}`);
  if (e.checkpoint && e.runState !== 'idle') parts.push(`batch ${e.checkpoint.batch}/${maxBatches}, step ${e.checkpoint.iteration}`);
  return parts.join(' · ');
}

/** `• budget: used / budget tokens`, when the session's agent has one (SPEC §14). */
function budgetLine(e: SessionEntry, budget: number): string[] {
  if (!budget) return [];
  const used = (e.sessionTokens?.input ?? 0) + (e.sessionTokens?.output ?? 0);
  return [`• budget: ${formatCount(used)} / ${formatCount(budget)} tokens this session${used >= budget ? ' (reached: /new starts a fresh one)' : ''}`];
}

function toolsLine(t: { preset: string; names: string[]; tokens: number }): string {
  return `preset ${t.preset} · ${t.names.length} tool${t.names.length === 1 ? '' : 's'} · ~${formatCount(t.tokens)} schema tokens per request`;
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
    mcp?: readonly { name: string; state: string; tools: number; error?: string }[];
    failovers?: {
      total: number;
      recent: readonly { from: string; to?: string; code: string; at: string }[];
      cooldowns: readonly { providerId: string; keyIndex: number; until: string; lastCode: string }[];
    };
  }>;
  /** Sync or async: in cluster mode the figures are read from the shared ledger. */
  usage(): GatewayUsage | Promise<GatewayUsage>;
}

/** What `/usage` shows of the gateway's totals. */
interface GatewayUsage {
  totals: { totalTokens: number; llmCalls: number };
  channels: Record<string, { totalTokens: number; llmCalls: number }>;
  /** Scheduled jobs' runs, by job id (SPEC §17). */
  jobs?: Record<string, { totalTokens: number; llmCalls: number }>;
  /** Heartbeat turns (SPEC §17). */
  heartbeat?: { totalTokens: number; llmCalls: number };
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
        const stored = report.sessions.persisted === null ? '?' : formatCount(report.sessions.persisted);
        return [
          session,
          `• gateway: v${report.version} · up ${formatUptime(report.uptimeSeconds)} · sessions ${formatCount(report.sessions.active)} active / ${stored} stored · ${report.queue.running} running, ${report.queue.queued} queued`,
          ...report.providers.map((p) => `• provider ${p.id} (${p.model}): ${plural(p.requests, 'request')} · ${plural(p.retries, 'retry', 'retries')} · ${plural(p.errors, 'error')} · ${plural(p.totalTokens, 'token')}`),
          ...(report.mcp ?? []).map((m) => `• MCP server ${m.name}: ${m.state} · ${plural(m.tools, 'tool')}${m.error ? ` (${m.error})` : ''}`),
          ...failoverLines(report.failovers),
        ].join('\n');
      },
    });
  }
  if (usage) {
    registry.register({
      ...usage,
      async run(context) {
        const session = await usage.run(context);
        const report = await figures.usage();
        const channel = context.session.entry.channel;
        const here = report.channels[channel] ?? { totalTokens: 0, llmCalls: 0 };
        return [
          session,
          `• gateway: ${plural(report.totals.totalTokens, 'token')} in ${plural(report.totals.llmCalls, 'LLM call')} · ${channel}: ${plural(here.totalTokens, 'token')} in ${plural(here.llmCalls, 'call')}`,
          ...(report.heartbeat?.llmCalls ? [`• heartbeat: ${plural(report.heartbeat.totalTokens, 'token')} in ${plural(report.heartbeat.llmCalls, 'call')}`] : []),
          ...Object.entries(report.jobs ?? {}).map(([id, t]) => `• job ${id}: ${plural(t.totalTokens, 'token')} in ${plural(t.llmCalls, 'call')}`),
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

/** `/status`'s failover lines: how many since start with the latest, and each key cooling down (SPEC §18). */
function failoverLines(f: Awaited<ReturnType<GatewayFigures['status']>>['failovers']): string[] {
  if (!f || (!f.total && !f.cooldowns.length)) return [];
  const last = f.recent[0];
  return [
    `• failovers: ${f.total}${last ? ` · latest ${last.at.slice(11, 19)} UTC: ${last.from} → ${last.to ?? 'nothing left'} (${last.code})` : ''}`,
    ...f.cooldowns.map((c) => `• cooling down: ${c.providerId} key ${c.keyIndex + 1} until ${c.until.slice(11, 19)} UTC (${c.lastCode})`),
  ];
}
