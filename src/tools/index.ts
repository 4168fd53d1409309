import type { ResolvedConfig } from '../config/resolved.ts';
import type { InboundSink } from '../core/channel-adapter.ts';
import type { SessionEntry } from '../sessions/entry.ts';
import type { SessionInit, SessionManager } from '../sessions/manager.ts';
import type { TranscriptEntry } from '../sessions/transcript.ts';
import { mediaTools } from './media-tools.ts';
import { memoryTools } from './memory-tools.ts';
import { ToolRegistry } from './registry.ts';
import { scheduleTools, type ScheduleJobs } from './schedule-tools.ts';
import { realTimeout, type TimeoutHandle } from './timeout.ts';
import type { SessionReader } from './session-access.ts';
import { sessionTools } from './session-tools.ts';

/** What the built-in tools need from the gateway around them. */
export interface BuiltinToolDeps {
  config: ResolvedConfig;
  sessions: SessionManager;
  reader: SessionReader;
  /** The gateway's sink, once it exists. */
  sink: () => InboundSink;
  history: (entry: SessionEntry) => Promise<TranscriptEntry[]>;
  timeout?: (ms: number) => TimeoutHandle;
  /** The bound of a turn's wait for MCP servers still connecting (tests fire it themselves). */
  arrivalTimeout?: (ms: number) => TimeoutHandle;
  /**
   * The scheduler's jobs, once they exist (`() => scheduler`, late-bound like `sink`): with it, the `schedule`
   * tool (`group:schedule`, SPEC §17) is registered; without it, it is not.
   */
  jobs?: () => ScheduleJobs | undefined;
}

/**
 * The registry with the built-in groups: `group:sessions`, `group:memory` (SPEC §11), `group:media` (SPEC §15), and
 * `group:schedule` (SPEC §17) when `deps.jobs` is given.
 */
export function createToolRegistry(deps: BuiltinToolDeps): ToolRegistry {
  const timeout = deps.timeout ?? realTimeout;
  const registry = new ToolRegistry({ timeoutMs: deps.config.tools.timeoutSeconds * 1000, maxResultChars: deps.config.tools.maxResultChars, timeout, arrivalTimeout: deps.arrivalTimeout });
  const createSession = async (init: SessionInit & { spawnDepth: number }): Promise<SessionEntry> => {
    const { spawnDepth, ...rest } = init;
    const session = await deps.sessions.acquire(rest);
    try {
      session.entry.spawnDepth = spawnDepth;
      await deps.sessions.save(session.entry);
      return session.entry;
    } finally {
      deps.sessions.release(session);
    }
  };
  const builtins = [
    ...sessionTools({ config: deps.config, reader: deps.reader, sink: deps.sink, createSession, history: deps.history, timeout }),
    ...memoryTools(),
    ...mediaTools({ maxBytes: deps.config.media.maxBytes }),
    ...(deps.jobs ? scheduleTools({ jobs: deps.jobs, defaultAgentId: deps.config.agents[0]?.id ?? 'main' }) : []),
  ];
  for (const tool of builtins) registry.register(tool);
  return registry;
}

export { ToolRegistry } from './registry.ts';
export type { Tool, ToolContext } from './tool.ts';
export type { ScheduleJobInput, ScheduleJobs, ScheduleJobView } from './schedule-tools.ts';
