"""Environments of other ecosystems served as OpenEnv environments.

`openenv import` writes env folders whose servers use these modules (each needs its ecosystem's
package installed, as the folder's `server/requirements.txt` says): `openenv.interop.gymnasium`
serves any registered Gymnasium id; `openenv.interop.verifiers` a Verifiers environment (its dataset as
tasks, its rubric's reward, its tools as MCP tools); `openenv.interop.ors` an Open Reward Standard
environment (its splits and tasks, the reward of each tool call). `openenv.interop.provenance` is
where an imported env says it came from.
"""
