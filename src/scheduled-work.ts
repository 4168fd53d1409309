import type { ResolvedConfig } from './config/resolved.ts';
import type { InboundSink } from './core/channel-adapter.ts';
import type { Clock } from './core/clock.ts';
import type { DeadlineTimers } from './core/deadline.ts';
import type { Logger } from './core/logger.ts';
import type { DeliveryTarget } from './core/message.ts';
import { Heartbeat } from './scheduler/heartbeat.ts';
import type { JobStore } from './scheduler/jobs.ts';
import { checkJobSchedules } from './scheduler/schedule.ts';
import { Scheduler } from './scheduler/scheduler.ts';

/** What the scheduled work needs from the rest of the gateway. */
export interface ScheduledWorkDeps {
  config: ResolvedConfig;
  store: JobStore;
  clock: Clock;
  logger: Logger;
  sink: () => InboundSink;
  canDeliver: (channel: string, accountId: string) => boolean;
  /** A session's last delivery target (the heartbeat answers where the main session last did). */
  deliveryTargetOf: (sessionKey: string) => Promise<DeliveryTarget | undefined>;
  timers?: DeadlineTimers;
}

/** The scheduler and the heartbeat of a gateway (SPEC §17), made before the gateway runs and started after it. */
export interface ScheduledWork {
  scheduler: Scheduler;
  heartbeat?: Heartbeat;
  start(): Promise<void>;
  stop(): void;
}

/** Checks the config jobs' schedules (ConfigError naming the job) and builds the scheduler and the heartbeat. */
export function scheduledWork(deps: ScheduledWorkDeps): ScheduledWork {
  const { config } = deps;
  checkJobSchedules(config.jobs, config.scheduler.minIntervalSeconds);
  const beat = config.heartbeat;
  const agent = beat ? config.agents.find((a) => a.id === (beat.agentId ?? config.agents[0]?.id)) ?? config.agents[0] : undefined;
  const heartbeat = beat && agent ? new Heartbeat({
    config: beat, agentId: agent.id, workspace: agent.workspace, deliveryTargetOf: deps.deliveryTargetOf, sink: deps.sink,
    clock: deps.clock, logger: deps.logger.child({ heartbeat: agent.id }), ...(deps.timers ? { timers: deps.timers } : {}),
  }) : undefined;
  const scheduler = new Scheduler({
    config, store: deps.store, clock: deps.clock, logger: deps.logger.child({ component: 'scheduler' }), sink: deps.sink, canDeliver: deps.canDeliver,
    ...(deps.timers ? { timers: deps.timers } : {}),
    ...(heartbeat ? { wake: async () => { await heartbeat.beat(true); } } : {}),
  });
  return {
    scheduler, ...(heartbeat ? { heartbeat } : {}),
    async start() {
      await scheduler.start();
      heartbeat?.start();
    },
    stop() {
      scheduler.stop();
      heartbeat?.stop();
    },
  };
}
