// The agent's version is the package's: one place to bump.
import pkg from '../../../package.json' with { type: 'json' };

export const AGENT_VERSION: string = pkg.version;
