// The harness's HTTP GET (load driver, health and monitor pages) is the test kit's.
export { type GetOptions, type HttpAnswer, httpGet, keepAliveAgent, NoAnswer } from "@leaf/testkit";
