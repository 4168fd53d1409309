import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import type { ResolvedConfig } from '../config/resolved.ts';
import type { InboundSink, TurnResult } from '../core/channel-adapter.ts';
import { internalMessage } from '../core/internal-message.ts';
import { outboundText, targetOf, type DeliveryTarget, type InboundMessage } from '../core/message.ts';
import { buildSessionKey } from '../routing/session-key.ts';
import { totalTokens, type SessionEntry } from '../sessions/entry.ts';
import type { SessionInit } from '../sessions/manager.ts';
import type { TranscriptEntry } from '../sessions/transcript.ts';
import type { TimeoutHandle } from './timeout.ts';
import { NOT_VISIBLE, SessionVisibility, type SessionReader } from './session-access.ts';
import { defineTool, type Tool, type ToolContext } from './tool.ts';

/** What the session tools use: the gateway's sink (the only way in), and read access to sessions. */
export interface SessionToolDeps {
  config: ResolvedConfig;
  reader: SessionReader;
  /** The gateway's sink; set once the gateway exists. */
  sink(): InboundSink;
  /** Creates a session entry (the spawned child) and returns it as stored. */
  createSession(init: SessionInit & { spawnDepth: number }): Promise<SessionEntry>;
  /** The transcript of a session's current id. */
  history(entry: SessionEntry): Promise<TranscriptEntry[]>;
  timeout(ms: number): TimeoutHandle;
}

const MAX_YIELD_SECONDS = 600;

/** The chat a turn's answer goes to: an internal message's own target, else the platform chat it came from. */
export function replyTargetOf(message: InboundMessage): DeliveryTarget | undefined {
  if (message.channel === 'internal') return message.internal?.deliverTo;
  return targetOf(message);
}

/** The final answer of a finished turn, for the session that waited on it. */
export function answerOf(result: TurnResult | undefined): string {
  return (result?.replies ?? []).map(outboundText).join('\n\n');
}

/** `sessions_spawn`, `sessions_yield` and `sessions` (SPEC §11, `group:sessions`). */
export function sessionTools(deps: SessionToolDeps): Tool[] {
  const visibility = new SessionVisibility(deps.config, deps.reader);
  const limits = deps.config.tools.sessions;
  /** Parent key → its children whose first run has not ended yet. */
  const runningChildren = new Map<string, Set<string>>();
  /** Caller key → the key it is waiting on (sessions_yield). */
  const waitsOn = new Map<string, string>();
  const agentIds = new Set(deps.config.agents.map((a) => a.id));

  const spawn = defineTool({
    name: 'sessions_spawn',
    group: 'group:sessions',
    description: 'Start a sub-agent in a new session on a task; returns at once. Its final answer comes back to this conversation as a message.',
    schema: z.object({
      prompt: z.string().trim().min(1).max(50_000).describe('the task for the sub-agent'),
      label: z.string().trim().min(1).max(80).optional().describe('a short name for the task'),
      agentId: z.string().max(64).optional().describe('the agent to run it (default: this one)'),
    }),
    async run({ prompt, label, agentId }, ctx: ToolContext) {
      const caller = ctx.entry;
      const agent = agentId ?? caller.agentId;
      if (!agentIds.has(agent)) return `Error: there is no agent "${agent}". Agents: ${[...agentIds].join(', ')}.`;
      const depth = (caller.spawnDepth ?? 0) + 1;
      if (depth > limits.maxSpawnDepth) return `Error: cannot spawn from here: sub-agents may nest ${limits.maxSpawnDepth} deep (tools.sessions.maxSpawnDepth). Do the work in this session instead.`;
      const running = runningChildren.get(caller.key) ?? new Set<string>();
      if (running.size >= limits.maxChildren) return `Error: ${running.size} sub-agents of this session are still running (tools.sessions.maxChildren is ${limits.maxChildren}). Wait for one to finish.`;
      const key = buildSessionKey({ agentId: agent, channel: 'internal', accountId: 'default', chatType: 'direct', subagentId: randomUUID() },
        { dmScope: 'main', threads: 'separate', identityLinks: {} });
      const child = await deps.createSession({ key, agentId: agent, channel: 'internal', accountId: 'default', chatType: 'direct', parentKey: caller.key, displayName: label, spawnDepth: depth });
      const name = label ?? key.slice(key.lastIndexOf(':') + 1, key.lastIndexOf(':') + 9);
      const message = internalMessage({
        kind: 'spawn', sessionKey: key, fromKey: caller.key, parentKey: caller.key, parentCorrelationId: ctx.correlationId,
        reportTo: { sessionKey: caller.key, label: name, deliverTo: replyTargetOf(ctx.message), correlationId: ctx.correlationId },
      }, prompt, ctx.now());
      const submission = await deps.sink()(message);
      if (submission.status !== 'accepted') return `Error: the sub-agent could not be started (${submission.status}).`;
      running.add(key);
      runningChildren.set(caller.key, running);
      void submission.done.finally(() => {
        running.delete(key);
        if (!running.size) runningChildren.delete(caller.key);
      });
      return { status: 'accepted', sessionKey: key, sessionId: child.sessionId, label: name };
    },
  });

  const yieldTool = defineTool({
    name: 'sessions_yield',
    group: 'group:sessions',
    description: `Send a message to another session and wait for its next answer (up to timeoutSeconds: default 60, at most ${MAX_YIELD_SECONDS}).`,
    schema: z.object({
      sessionKey: z.string().min(1).max(512),
      message: z.string().trim().min(1).max(50_000),
      // SPEC §11 "at most 600": a longer wait is cut to it rather than refused as bad arguments.
      timeoutSeconds: z.number().int().min(1).default(60),
    }),
    maxDurationMs: ({ timeoutSeconds }) => (Math.min(timeoutSeconds, MAX_YIELD_SECONDS) + 5) * 1000,
    async run({ sessionKey, message, timeoutSeconds: asked }, ctx: ToolContext) {
      const timeoutSeconds = Math.min(asked, MAX_YIELD_SECONDS);
      const caller = ctx.entry;
      const target = await visibility.resolve(caller, sessionKey);
      if (!target) return NOT_VISIBLE;
      if (target.key === caller.key) return 'Error: refused: a session cannot wait on itself.';
      if (waitsOnChain(waitsOn, target.key, caller.key)) return `Error: refused: ${target.key} is waiting on this session, so waiting on it would never end.`;
      waitsOn.set(caller.key, target.key);
      const timer = deps.timeout(timeoutSeconds * 1000);
      try {
        const submission = await deps.sink()(internalMessage({ kind: 'yield', sessionKey: target.key, fromKey: caller.key, parentCorrelationId: ctx.correlationId }, message, ctx.now()));
        if (submission.status !== 'accepted') return `Error: the message was not accepted (${submission.status}).`;
        const result = await ctx.lendSlot(() => Promise.race([
          submission.done.then((r) => ({ done: r })),
          new Promise<'timeout'>((resolve) => timer.signal.addEventListener('abort', () => resolve('timeout'), { once: true })),
        ]));
        if (result === 'timeout') return { status: 'timeout', note: `No answer within ${timeoutSeconds} s; the other session's run goes on.` };
        return { status: 'ok', reply: answerOf(result.done) };
      } finally {
        timer.clear();
        waitsOn.delete(caller.key);
      }
    },
  });

  const sessions = defineTool({
    name: 'sessions',
    group: 'group:sessions',
    description: 'list: the sessions you can see; history: the last messages of one; send: queue a message into one without waiting.',
    schema: z.object({
      action: z.enum(['list', 'history', 'send']),
      sessionKey: z.string().min(1).max(512).optional(),
      limit: z.number().int().min(1).max(50).default(20),
      message: z.string().trim().min(1).max(50_000).optional(),
    }),
    async run({ action, sessionKey, limit, message }, ctx: ToolContext) {
      const caller = ctx.entry;
      if (action === 'list') {
        const list = await visibility.list(caller, limit);
        return {
          sessions: list.map((e) => ({
            key: e.key, channel: e.channel, runState: e.runState, updatedAt: new Date(e.updatedAt).toISOString(),
            tokens: { input: e.tokens.input, output: e.tokens.output, cacheRead: e.tokens.cacheRead, cacheWrite: e.tokens.cacheWrite }, totalTokens: totalTokens(e.tokens),
            ...(e.displayName ? { label: e.displayName } : {}),
          })),
        };
      }
      if (!sessionKey) return `Error: action "${action}" needs sessionKey.`;
      const target = await visibility.resolve(caller, sessionKey);
      if (!target) return NOT_VISIBLE;
      if (action === 'history') {
        const entries = target.messageCount > 0 ? await deps.history(target) : [];
        const messages = entries.filter((e) => e.type === 'message').slice(-limit).map((m) => ({
          role: m.role, content: m.content.length > 4000 ? `${m.content.slice(0, 4000)}…` : m.content, at: m.at,
          ...(m.toolCalls?.length ? { toolCalls: m.toolCalls.map((c) => c.name) } : {}),
        }));
        return { sessionKey: target.key, messages };
      }
      if (!message) return 'Error: action "send" needs message.';
      if (target.key === caller.key) return 'Error: refused: use your own answer instead of sending to this session.';
      const submission = await deps.sink()(internalMessage({ kind: 'send', sessionKey: target.key, fromKey: caller.key, parentCorrelationId: ctx.correlationId }, message, ctx.now()));
      return submission.status === 'accepted' ? { status: 'accepted', sessionKey: target.key } : `Error: the message was not accepted (${submission.status}).`;
    },
  });

  return [spawn, yieldTool, sessions];
}

/** True when following "waits on" links from `from` reaches `to`. */
function waitsOnChain(waitsOn: ReadonlyMap<string, string>, from: string, to: string): boolean {
  let current: string | undefined = from;
  for (let i = 0; i < 64 && current; i++) {
    if (current === to) return true;
    current = waitsOn.get(current);
  }
  return false;
}
