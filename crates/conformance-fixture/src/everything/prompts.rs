//! `prompts/list` and `prompts/get`: the catalogue's prompts, one of which
//! answers with an `InputRequiredResult` (MRTR).

// Sampling and roots are deprecated (SEP-2577) but are what the scenarios use.
#![allow(deprecated)]

use super::*;

impl Everything {
    /// `prompts/list`.
    pub(crate) async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let prompts = vec![
            Prompt::new(
                "test_simple_prompt",
                Some("A simple prompt without arguments"),
                None,
            ),
            Prompt::new(
                "test_prompt_with_arguments",
                Some("A prompt that substitutes two required arguments"),
                Some(vec![
                    PromptArgument::new("arg1")
                        .with_description("First test argument")
                        .with_required(true),
                    PromptArgument::new("arg2")
                        .with_description("Second test argument")
                        .with_required(true),
                ]),
            ),
            Prompt::new(
                "test_prompt_with_embedded_resource",
                Some("A prompt that embeds the resource named by resourceUri"),
                Some(vec![
                    PromptArgument::new("resourceUri")
                        .with_description("URI of the resource to embed")
                        .with_required(true),
                ]),
            ),
            Prompt::new(
                "test_prompt_with_image",
                Some("A prompt that includes image content"),
                None,
            ),
            Prompt::new(
                MRTR_PROMPT,
                Some("A prompt that first asks for context through elicitation (SEP-2322)"),
                None,
            ),
        ];
        Ok(ListPromptsResult::with_all_items(prompts)
            .with_ttl_ms(CACHE_TTL_MS)
            .with_cache_scope(rmcp::model::CacheScope::Public))
    }

    /// `prompts/get`.
    pub(crate) async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let args = request.arguments.as_ref();
        let result = match request.name.as_str() {
            "test_simple_prompt" => GetPromptResult::new(vec![PromptMessage::new_text(
                Role::User,
                "This is a simple prompt for testing.",
            )])
            .with_description("A simple prompt without arguments"),
            "test_prompt_with_arguments" => {
                let arg1 = string_arg(args, "arg1")?;
                let arg2 = string_arg(args, "arg2")?;
                GetPromptResult::new(vec![PromptMessage::new_text(
                    Role::User,
                    format!("Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"),
                )])
                .with_description("A prompt with arguments")
            }
            "test_prompt_with_embedded_resource" => {
                let uri = string_arg(args, "resourceUri")?;
                GetPromptResult::new(vec![
                    PromptMessage::new(
                        Role::User,
                        ContentBlock::resource(
                            ResourceContents::text("Embedded resource content for testing.", uri)
                                .with_mime_type("text/plain"),
                        ),
                    ),
                    PromptMessage::new_text(
                        Role::User,
                        "Please process the embedded resource above.",
                    ),
                ])
                .with_description("A prompt with an embedded resource")
            }
            "test_prompt_with_image" => GetPromptResult::new(vec![
                PromptMessage::new(Role::User, ContentBlock::image(PNG_BASE64, "image/png")),
                PromptMessage::new_text(Role::User, "Please analyze the image above."),
            ])
            .with_description("A prompt with an image"),
            MRTR_PROMPT => {
                require_inputs(&cx, &[InputKind::Elicitation])?;
                let Some(answer) = elicit_answer(request.input_responses.as_ref(), "user_context")
                else {
                    return Ok(input_required(
                        [(
                            "user_context",
                            elicitation("What context should the prompt use?", "context")?,
                        )],
                        None,
                    ));
                };
                let context = answer.string_field("context").unwrap_or("(none provided)");
                GetPromptResult::new(vec![PromptMessage::new_text(
                    Role::User,
                    format!("Prompt built from the elicited context: {context}"),
                )])
                .with_description("A prompt built from elicited context")
            }
            other => {
                return Err(ErrorData::invalid_params(
                    format!("unknown prompt `{other}` (field `name`)"),
                    Some(json!({ "name": other })),
                ));
            }
        };
        Ok(result.into())
    }
}
