export * from './message.ts';
export * from './errors.ts';
export * from './clock.ts';
export * from './logger.ts';
export * from './secrets.ts';
export * from './channel-adapter.ts';
export * from './channel-leases.ts';
