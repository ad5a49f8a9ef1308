import com.alibaba.fastjson.JSON;
import com.alibaba.fastjson.JSONObject;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.Map;
import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.AclException;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.acl.plain.PlainAccessValidator;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;

/**
 * The real RocketMQ 4.9.8 ACL classes over cases read from stdin, one JSON object a line:
 * {"code": int, "ext": {name: value}, "body": base64, "addr": "ip:port",
 *  "sign": {"ak": ..., "sk": ..., "token": ... or absent} or absent, "tamper": bool}.
 * For each, one line out: the Signature AclClientRPCHook put in (or "-"), a tab, then "OK" when
 * PlainAccessValidator.validate(parse(...)) let the request through, else "ERR " and the
 * AclException's message. The ACL files are read from -Drocketmq.home.dir.
 */
public class AclGolden {
    public static void main(String[] args) throws Exception {
        PlainAccessValidator validator = new PlainAccessValidator();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        StringBuilder out = new StringBuilder();
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isEmpty()) {
                continue;
            }
            JSONObject c = JSON.parseObject(line);
            RemotingCommand cmd = RemotingCommand.createRequestCommand(c.getIntValue("code"), null);
            JSONObject ext = c.getJSONObject("ext");
            if (ext != null) {
                for (Map.Entry<String, Object> e : ext.entrySet()) {
                    cmd.addExtField(e.getKey(), String.valueOf(e.getValue()));
                }
            }
            String body = c.getString("body");
            if (body != null) {
                cmd.setBody(Base64.getDecoder().decode(body));
            }
            String addr = c.getString("addr");
            JSONObject sign = c.getJSONObject("sign");
            String signature = "-";
            if (sign != null) {
                SessionCredentials cred = new SessionCredentials(sign.getString("ak"), sign.getString("sk"));
                if (sign.getString("token") != null) {
                    cred.setSecurityToken(sign.getString("token"));
                }
                new AclClientRPCHook(cred).doBeforeRequest(addr, cmd);
                signature = cmd.getExtFields().get(SessionCredentials.SIGNATURE);
            }
            if (c.getBooleanValue("tamper") && cmd.getBody() != null && cmd.getBody().length > 0) {
                cmd.getBody()[0] ^= 1;
            }
            String verdict;
            try {
                validator.validate(validator.parse(cmd, addr));
                verdict = "OK";
            } catch (AclException e) {
                verdict = "ERR " + e.getMessage();
            }
            out.append(signature).append('\t').append(verdict.replace('\n', ' ')).append('\n');
        }
        System.out.print(out);
        System.out.flush();
        System.exit(0);
    }
}
