//! Posts: reply, edit, delete. Each operation checks its input and
//! limits, commits through the store, and hands its `Change` to `apply`.

use super::limits::{Action, ClientIp, Who};
use super::{AppResult, AppState, apply::apply, commit, text};
use crate::model::change::{Acted, How};
use crate::model::{Body, Change, Post, User};
use crate::store::{NewPost, Store};

/// A reply as a door received it, checked but not yet rendered.
pub struct Reply {
    pub topic_id: i64,
    pub parent_id: Option<i64>,
    pub body: Body,
    /// The remote `Note`'s id, for a reply that came over federation
    /// (`NewPost::remote_id`).
    pub remote_id: Option<String>,
}

/// Replies to a topic: the rate limit, the rendering, the write, the live
/// events.
pub async fn create_post<S: Store>(state: &AppState<S>, user: User, ip: ClientIp, reply: Reply) -> AppResult<Post> {
    state.limits.check(Action::Post, ip, Who::User(user.id))?;
    let body = text::render(reply.body).await?;
    let new = NewPost { topic_id: reply.topic_id, parent_id: reply.parent_id, body, remote_id: reply.remote_id };
    commit(state, move |st| async move {
        let mut post = st.store.create_post(&user, new).await?;
        let inbox = std::mem::take(&mut post.inbox);
        apply(&st, Change::PostCreated { notify: post.notify, inbox, post: post.clone() });
        Ok(post)
    })
    .await
}

/// Replaces a post's body: the rate limit, the rendering, the write.
pub async fn edit_post<S: Store>(
    state: &AppState<S>,
    user: User,
    ip: ClientIp,
    id: i64,
    body: Body,
) -> AppResult<Post> {
    state.limits.check(Action::Edit, ip, Who::User(user.id))?;
    let body = text::render(body).await?;
    commit(state, move |st| async move {
        let post = st.store.edit_post(&user, id, body).await?;
        apply(&st, Change::PostEdited { post: post.clone(), by: None });
        Ok(post)
    })
    .await
}

/// Deletes a post (its author, or an admin); returns its topic's id.
pub async fn delete_post<S: Store>(state: &AppState<S>, user: User, id: i64) -> AppResult<i64> {
    commit(state, move |st| async move {
        let topic_id = st.store.delete_post(&user, id).await?;
        apply(&st, Change::PostRemoved { topic_id, post_id: id, by: Some(Acted::by(&user, How::Deleted, None)) });
        // The pictures it alone showed go.
        super::media::sweep(&st).await;
        Ok(topic_id)
    })
    .await
}
