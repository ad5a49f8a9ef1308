"""The ACL admin codes of the admin group: accounts and global white addresses changed in the
ACL files, and their versions.

Mirrors AdminBrokerProcessor.updateAndCreateAccessConfig, deleteAccessConfig,
updateGlobalWhiteAddrsConfig and getBrokerAclConfigVersion, RocketMQ 4.9.x, over
actors.acl.plain_permission_manager. The files are the state: this group rewrites them,
and every processor's check reads them again within its RELOAD_CHECK_MS (as every Java
broker's AclFileWatchService does). The codes are admin codes of ours only in their effect:
RocketMQ 4.9 lets any signed account call them, and so do we. A broker without aclEnable
answers them with the failure code and says why (Java answers with a null remark).
"""

from __future__ import annotations

import json
import logging

from actors.acl.plain_permission_manager import PlainPermissionManager
from actors.acl.remote_address_strategy import AclError
from actors.broker.context import BrokerContext
from actors.core import Request
from protocol.codes import ResponseCode as RS
from protocol.command import RemotingCommand

log = logging.getLogger(__name__)

NOT_ENABLED = "ACL is not enabled on this broker (aclEnable=false)"


def _split(text: str | None) -> list[str] | None:
    """UtilAll.split(text, ","): None stays None."""
    return None if text is None else [p for p in text.split(",") if p]


class AclAdmin:
    """The ACL admin codes for one admin core."""

    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        bc = ctx.broker_config
        self.manager = (
            PlainPermissionManager(bc.acl_home, bc.aclPlainFile) if bc.aclEnable else None
        )

    def update_access_config(self, req: Request, now_ms: int) -> RemotingCommand:
        """UPDATE_AND_CREATE_ACL_CONFIG (50)."""
        cmd = req.cmd
        ext = cmd.ext_fields or {}
        if self.manager is None:
            return cmd.make_response(RS.UPDATE_AND_CREATE_ACL_CONFIG_FAILED, NOT_ENABLED)
        conf = {"accessKey": ext.get("accessKey"), "secretKey": ext.get("secretKey"),
                "whiteRemoteAddress": ext.get("whiteRemoteAddress"),
                "admin": ext.get("admin", "false").strip().lower() == "true",
                "defaultTopicPerm": ext.get("defaultTopicPerm"),
                "defaultGroupPerm": ext.get("defaultGroupPerm"),
                "topicPerms": _split(ext.get("topicPerms")),
                "groupPerms": _split(ext.get("groupPerms"))}  # fmt: skip
        try:
            self.manager.update_access_config(conf)
        except (AclError, OSError) as exc:
            log.warning("UPDATE_AND_CREATE_ACL_CONFIG of %s refused: %s", conf["accessKey"],
                        str(exc).replace(str(conf["secretKey"]), "***") if conf["secretKey"]
                        else exc)  # fmt: skip
            return cmd.make_response(RS.UPDATE_AND_CREATE_ACL_CONFIG_FAILED, str(exc))
        log.info("ACL account %s updated by %s", conf["accessKey"], req.peer)
        return cmd.make_response(RS.SUCCESS, None, {})

    def delete_access_config(self, req: Request, now_ms: int) -> RemotingCommand:
        """DELETE_ACL_CONFIG (51)."""
        cmd = req.cmd
        ak = (cmd.ext_fields or {}).get("accessKey") or ""
        if self.manager is None:
            return cmd.make_response(RS.DELETE_ACL_CONFIG_FAILED, NOT_ENABLED)
        try:
            done = self.manager.delete_access_config(ak)
        except (AclError, OSError) as exc:
            return cmd.make_response(RS.DELETE_ACL_CONFIG_FAILED, str(exc))
        if not done:
            return cmd.make_response(RS.DELETE_ACL_CONFIG_FAILED, f"The accesskey[{ak}] "
                                     "corresponding to accessConfig has been deleted failed.")
        log.info("ACL account %s deleted by %s", ak, req.peer)
        return cmd.make_response(RS.SUCCESS, None, {})

    def acl_config(self, req: Request, now_ms: int) -> RemotingCommand:
        """GET_BROKER_CLUSTER_ACL_CONFIG (54, as RocketMQ 4.7-4.8 served it): the global white
        addresses and the accounts, for admin accounts only and never with their secret
        keys."""
        cmd = req.cmd
        manager, why = self._reloaded()
        if manager is None:
            return cmd.make_response(RS.SYSTEM_ERROR, why)
        whites = [w for ws in manager.global_white_text.values() for w in ws]
        body = json.dumps({"globalWhiteAddrs": whites,
                           "plainAccessConfigs": manager.access_configs()},
                          separators=(",", ":"), default=str).encode()  # fmt: skip
        return cmd.make_response(RS.SUCCESS, None, None, body)

    def update_global_white_addrs(self, req: Request, now_ms: int) -> RemotingCommand:
        """UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53)."""
        cmd = req.cmd
        ext = cmd.ext_fields or {}
        addrs = ext.get("globalWhiteAddrs")
        if self.manager is None:
            return cmd.make_response(RS.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED, NOT_ENABLED)
        failed = f"The globalWhiteAddresses[{addrs}] has been updated failed."
        try:
            done = addrs is not None and self.manager.update_global_white_addrs(
                _split(addrs) or [], ext.get("aclFileFullPath") or None)
        except (AclError, OSError) as exc:
            return cmd.make_response(RS.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED, str(exc))
        if not done:
            return cmd.make_response(RS.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED, failed)
        return cmd.make_response(RS.SUCCESS, None, {})

    def _reloaded(self) -> tuple[PlainPermissionManager | None, str]:
        """The manager with the files read afresh, or (None, why not)."""
        if self.manager is None:
            return None, NOT_ENABLED
        try:
            self.manager.load()
        except AclError as exc:
            return None, str(exc)
        return self.manager, ""

    def acl_config_version(self, req: Request, now_ms: int) -> RemotingCommand:
        """GET_BROKER_CLUSTER_ACL_INFO (52): the files' data versions and who answers."""
        cmd = req.cmd
        manager, why = self._reloaded()
        if manager is None:
            return cmd.make_response(RS.SYSTEM_ERROR, why)
        versions = manager.versions()
        default = versions.get(manager.default_file, {"counter": 0, "timestamp": 0})
        bc = self.ctx.broker_config
        ext = {"version": json.dumps(default, separators=(",", ":")),
               "allAclFileVersion": json.dumps(versions, separators=(",", ":")),
               "brokerAddr": bc.broker_addr, "brokerName": bc.brokerName,
               "clusterName": bc.brokerClusterName}  # fmt: skip
        return cmd.make_response(RS.SUCCESS, None, ext)
