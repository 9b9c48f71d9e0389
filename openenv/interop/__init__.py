"""Environments of other ecosystems served as OpenEnv environments.

`openenv import` writes env folders whose servers use these modules (each needs its ecosystem's
package installed, as the folder's `server/requirements.txt` says): `openenv.interop.gymnasium`
serves any registered Gymnasium id.
"""
