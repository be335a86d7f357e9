// The chaos suite's harness, for the short form's test and for anyone composing their own faults.
export { FakeClock, findLibfaketime, type HttpAnswer, httpGet, NoAnswer } from "@leaf/testkit";
export { IdColumn, IdRecorder, type SpaceSummary, summarizeColumn } from "./id-recorder";
export {
  LeafProcess,
  type LeafProcessOptions,
  type StartOutcome,
  serverBuildTime,
  serverCli,
} from "./leaf-process";
export {
  type Endpoint,
  errorCode,
  LoadDriver,
  type LoadOptions,
  type LoopReport,
  type LoopTarget,
} from "./load-driver";
export { type QueuedOutcome, QueuedRequests } from "./pipelined";
export {
  type ChaosReport,
  reportTable,
  reportText,
  type ScenarioReport,
  writeReport,
} from "./report";
export {
  assemble,
  budgets,
  type ChaosOptions,
  openRun,
  runChaos,
  runScenario,
  selectScenarios,
} from "./runner";
export { type Check, type MaxIdSource, type RunContext, ScenarioRun } from "./scenario-run";
export { type FaultKind, SCENARIOS, type Scenario, scenariosOf } from "./scenarios";
export { REGISTRIES, type RegistryKind } from "./server-configs";
export { Services } from "./services";
