# env.sh: source it in every terminal of the walkthrough (docs/distributed.md): . ./env.sh
export RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0  # Ray keeps every address on 127.0.0.1
export RAY_ADDRESS=127.0.0.1:6379           # the one cluster every process of the team joins
export RAY_AUTH_MODE=token                  # the cluster admits only processes with its token
[ -s ray-token ] || (umask 077 && python3 -c 'import secrets; print(secrets.token_hex(32))' > ray-token)
RAY_AUTH_TOKEN="$(cat ray-token)" && export RAY_AUTH_TOKEN
