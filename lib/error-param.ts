/**
 * The request field an error of a service is about (OpenAI's `param`), carried beside a Connect
 * error as this metadata entry: the inference service knows which field it refused (an image
 * part, a schema), the gateway answers the 400 naming it.
 */
export const ERROR_PARAM_METADATA = "tessera-error-param";
